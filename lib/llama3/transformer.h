// Llama 3 as torchtitan builds it (torchtitan/models/llama3), as libtorch modules: the model
// family "llama3" of models/registry.h.
//
// Shapes: B batch, T sequence, D dim, H heads, K kv heads, E head_dim, V vocab.
// Parameter names match torchtitan's: tok_embeddings.weight, layers.0.attention.wq.weight, ...,
// layers.0.feed_forward.w1.weight, layers.0.attention_norm.weight, norm.weight, output.weight.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/layers.h"
#include "model/model.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "model/rotary.h"

namespace titan {

// Rotary embedding table (complex, (T, E/2)) with Llama 3.1 frequency scaling.
at::Tensor precompute_freqs_cis(int64_t head_dim, int64_t max_seq_len, double theta,
                                const RopeScaling& scaling);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);  // (B, T, D) -> (B, T, D)
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int64_t layer_id, const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);  // (B, T, D)
  // torchtitan's init; `weight_init_std` is the std of wo, w2 and w3. `init(param, fill)` runs
  // each fill on the parameter's values (param_initializer says where they go).
  void init_weights(double weight_init_std, const ParamInit& init);
  int64_t layer_id() const { return layer_id_; }
  Attention attention{nullptr};
  FeedForward feed_forward{nullptr};
  RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};

 private:
  int64_t layer_id_;
  double dropout_;
};
TORCH_MODULE(TransformerBlock);

class TransformerImpl : public ModelImpl {
 public:
  explicit TransformerImpl(const ModelArgs& args, const ParamMemory& memory = {});
  void init_weights(const StartingValues& keep = {}) override;
  std::vector<at::Tensor> unit_parameters(ParamUnit unit, int64_t layer) const override;

  torch::nn::Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear output{nullptr};

 protected:
  at::Tensor embed(const at::Tensor& tokens) override;
  BlockFunction block_function(int64_t layer) override;
  at::Tensor final_norm(const at::Tensor& h) override;
  at::Tensor project(const at::Tensor& h) override;

 private:
  at::Tensor freqs_cis_;  // buffer, not saved (torchtitan: persistent=False)
};
// TORCH_MODULE's holder, and the interface's: a Transformer is passed where a Model is taken.
class Transformer : public torch::nn::ModuleHolder<TransformerImpl> {
 public:
  using torch::nn::ModuleHolder<TransformerImpl>::ModuleHolder;
  using Impl = TransformerImpl;
  operator Model() const { return Model(std::shared_ptr<ModelImpl>(ptr())); }  // NOLINT
};

}  // namespace titan
