// DeepSeek-V3's multi-head latent attention and its YaRN RoPE table, as torchtitan v0.2.2
// computes them (torchtitan/models/deepseek_v3/model/model.py).
//
// Shapes: B batch, T sequence, D dim, H heads, N qk_nope_head_dim, R qk_rope_head_dim,
// V v_head_dim, L kv_lora_rank.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/layers.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"

namespace titan::deepseek_v3 {

// The RoPE table of the rotary parts: (max_seq_len, R/2) complex64. With max_seq_len above
// mla.original_seq_len the frequencies are YaRN's: between the correction range of beta_fast
// and beta_slow rotations, blended linearly from f / rope_factor to f. In float32, in
// torchtitan's order of operations.
at::Tensor precompute_freqs_cis(const ModelArgs& args);

// softmax's scale: 1 / sqrt(N + R), times mscale' squared where YaRN applies
// (mscale' = 0.1 mscale ln(rope_factor) + 1).
double softmax_scale(const ModelArgs& args);

class AttentionImpl : public torch::nn::Module {
 public:
  // Made in torchtitan's order: wq (or wq_a, q_norm, wq_b), wkv_a, kv_norm, wkv_b, wo.
  explicit AttentionImpl(const ModelArgs& args);
  // x (B, T, D) -> (B, T, D); freqs_cis from precompute_freqs_cis.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);
  // torchtitan's init, in its order: wkv_a, wkv_b, then wq_a and wq_b (or wq) at std 0.02; wo at
  // init_std; the norms to ones.
  void init_weights(double init_std, const ParamInit& init);

  torch::nn::Linear wq{nullptr}, wq_a{nullptr}, wq_b{nullptr};  // wq, or wq_a and wq_b
  RMSNorm q_norm{nullptr};                                      // with wq_a and wq_b
  torch::nn::Linear wkv_a{nullptr}, wkv_b{nullptr}, wo{nullptr};
  RMSNorm kv_norm{nullptr};

 private:
  MlaArgs mla_;
  int64_t n_heads_;
  double scale_;
};
TORCH_MODULE(Attention);

}  // namespace titan::deepseek_v3
