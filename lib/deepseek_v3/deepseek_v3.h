// DeepSeek-V3 as torchtitan v0.2.2 builds it (torchtitan/models/deepseek_v3), as libtorch modules:
// the model family "deepseek_v3" of models/registry.h. Multi-head latent attention with YaRN
// (attention.h), n_dense_layers SwiGLU blocks, then mixture-of-experts blocks (lib/moe) whose
// expert biases are updated before each optimizer step (load balancing).
//
// Shapes: B batch, T sequence, D dim, V vocab.
// Parameter names match torchtitan's: tok_embeddings.weight, layers.0.attention.wkv_a.weight,
// layers.0.attention_norm.weight, layers.0.feed_forward.w1.weight (dense blocks),
// layers.1.moe.experts.w1 (MoE blocks), norm.weight, output.weight; buffers
// layers.1.moe.expert_bias.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "deepseek_v3/attention.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "moe/moe.h"

namespace titan::deepseek_v3 {

class BlockImpl : public torch::nn::Module {
 public:
  // Made in torchtitan's order: attention, attention_norm, ffn_norm, then the feed-forward or the
  // MoE layer.
  BlockImpl(int64_t layer_id, const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);  // (B, T, D)
  // torchtitan's init, in its order: the norms, the attention, the feed-forward or MoE layer, at
  // std 0.02 / sqrt(2 (layer_id + 1)).
  void init_weights(const ParamInit& init);
  Attention attention{nullptr};
  RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};
  FeedForward feed_forward{nullptr};  // the first n_dense_layers blocks
  moe::MoE moe{nullptr};              // the others

 private:
  int64_t layer_id_;
};
TORCH_MODULE(Block);

class DeepSeekV3Impl : public ModelImpl {
 public:
  explicit DeepSeekV3Impl(const ModelArgs& args, const ParamMemory& memory = {});
  void init_weights(const StartingValues& keep = {}) override;
  std::vector<at::Tensor> unit_parameters(ParamUnit unit, int64_t layer) const override;
  std::vector<ExpertLoad> expert_loads() const override;

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
TORCH_MODULE(DeepSeekV3);

}  // namespace titan::deepseek_v3
