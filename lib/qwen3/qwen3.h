// Qwen3 and Qwen3-MoE as torchtitan v0.2.2 builds them (torchtitan/models/qwen3), as libtorch
// modules: the model family "qwen3" of models/registry.h. Beside Llama 3: RMSNorm on each head's q
// and k (qk_norm), RoPE by rotate_half on a cos/sin cache, a head_dim of its own, the SwiGLU hidden
// size given directly, and (enable_weight_tying) an output projection that is the embedding's
// weight. The MoE flavors have a mixture-of-experts layer (lib/moe) in every block in place of the
// feed-forward.
//
// Shapes: B batch, T sequence, D dim, H heads, K kv heads, E head_dim, V vocab.
// Parameter names match torchtitan's: tok_embeddings.weight, layers.0.attention.wq.weight,
// layers.0.attention.q_norm.weight, ..., layers.0.feed_forward.w1.weight, norm.weight, and
// output.weight unless tied (a tied model holds the one tensor once, as tok_embeddings.weight);
// MoE blocks: layers.0.moe.experts.w1, layers.0.moe.router.gate.weight, buffer
// layers.0.moe.expert_bias.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "model/layers.h"
#include "model/model.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "moe/moe.h"

namespace titan::qwen3 {

// torchtitan's qwen3 flavors: dense (debugmodel, 0.6B, 1.7B, 4B, 8B, 14B, 32B) after
// titan-train's tiny, then MoE (debugmodel_moe, 30B-A3B, 235B-A22B) after titan-train's tiny_moe
// (tiny and tiny_moe are for tests).
const std::vector<std::string>& flavors();
// The args of a flavor (family "qwen3"). Throws std::invalid_argument for another name.
ModelArgs flavor_args(const std::string& flavor);

// The RoPE cache: (T, 2E), cos(cat(f, f)) then sin(cat(f, f)) of each position's angles f.
at::Tensor precompute_rope_cache(int64_t head_dim, int64_t max_seq_len, double theta);

// x * cos + rotate_half(x) * sin for x: (B, T, H, E), cos and sin from `rope_cache`'s first T
// rows in x's dtype; rotate_half(x) = cat(-x[..., E/2:], x[..., :E/2]).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& rope_cache);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& rope_cache);  // (B, T, D) -> (B, T, D)
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // over E; null without qk_norm

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t layer_id, const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& rope_cache);  // (B, T, D)
  // torchtitan's qwen3 init, in its order: wq, wk, wv (std 0.02), wo (weight_init_std), then w1
  // (0.02), w2, w3 (weight_init_std); every norm weight to ones.
  void init_weights(double weight_init_std, const ParamInit& init);
  int64_t layer_id() const { return layer_id_; }
  Attention attention{nullptr};
  FeedForward feed_forward{nullptr};  // null in an MoE block
  moe::MoE moe{nullptr};              // null in a dense block
  RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};

 private:
  int64_t layer_id_;
};
TORCH_MODULE(Block);

class Qwen3Impl : public ModelImpl {
 public:
  explicit Qwen3Impl(const ModelArgs& args, const ParamMemory& memory = {});
  void init_weights(const StartingValues& keep = {}) override;
  std::vector<at::Tensor> unit_parameters(ParamUnit unit, int64_t layer) const override;
  std::vector<ExpertLoad> expert_loads() const override;

  torch::nn::Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear output{nullptr};  // null when tied: the output is tok_embeddings->weight

 protected:
  at::Tensor embed(const at::Tensor& tokens) override;
  BlockFunction block_function(int64_t layer) override;
  at::Tensor final_norm(const at::Tensor& h) override;
  at::Tensor project(const at::Tensor& h) override;

 private:
  at::Tensor rope_cache_;  // buffer, not saved (torchtitan: persistent=False)
};
TORCH_MODULE(Qwen3);

}  // namespace titan::qwen3
