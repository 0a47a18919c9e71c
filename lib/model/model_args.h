// A model's shape: what every family's flavors set (each family's library lists its flavors;
// models/registry.h finds them by name).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace titan {

struct RopeScaling {
  bool enabled = true;  // Llama 3.1 frequency scaling, applied by torchtitan for every flavor
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192.0;
};

// A mixture-of-experts layer as torchtitan v0.2.2 builds one (torchtitan/models/moe, MoEArgs):
// its router, experts and load balancing (lib/moe).
struct MoEArgs {
  int64_t num_experts = 8;
  int64_t num_shared_experts = 1;      // one SwiGLU of hidden_dim * num_shared_experts beside them
  std::string score_func = "sigmoid";  // "softmax" or "sigmoid", in float32
  bool route_norm = false;             // the chosen scores divided by their sum
  double route_scale = 1.0;
  bool gate_bias = false;
  bool score_before_experts = true;  // scale each expert's input (else its output) by its score
  int64_t top_k = 1;
  // Node-limited routing: the experts in num_expert_groups groups, of which the
  // num_limited_groups with the largest sum of their two best scores are eligible (unset: off).
  std::optional<int64_t> num_expert_groups;
  std::optional<int64_t> num_limited_groups;
  std::optional<double> load_balance_coeff = 1e-3;  // unset: no expert_bias
  // Whether expert_bias is updated before each optimizer step (torchtitan v0.2.2: deepseek_v3
  // yes, qwen3 never).
  bool update_expert_bias = false;
  bool force_load_balance = false;  // debug.moe_force_load_balance: round-robin routing
  // debug.moe_bf16_experts: the routed experts' matmuls in bfloat16, as torchtitan's grouped_mm
  // path computes them whatever the run's dtype (its input and weights cast, the output cast back).
  bool bf16_experts = false;
};

// DeepSeek-V3's multi-head latent attention (torchtitan/models/deepseek_v3): q projected directly
// (q_lora_rank 0) or through a rank-q_lora_rank bottleneck with an RMSNorm; k and v from one
// rank-kv_lora_rank latent (RMSNorm'd) plus a rotary part of qk_rope_head_dim shared by the
// heads; v heads of their own width. YaRN stretches the RoPE frequencies when max_seq_len exceeds
// original_seq_len (rope_factor, beta_fast, beta_slow) and scales the softmax by mscale.
struct MlaArgs {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  int64_t original_seq_len = 4096;
  double rope_factor = 40;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1.0;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

struct ModelArgs {
  std::string family = "llama3";  // model.name: the registry's family (models/registry.h)
  int64_t dim = 4096;
  int64_t n_layers = 32;
  int64_t n_heads = 32;
  std::optional<int64_t> n_kv_heads;  // unset: n_heads (no GQA)
  int64_t vocab_size = 128256;
  int64_t multiple_of = 256;
  std::optional<double> ffn_dim_multiplier;
  double norm_eps = 1e-5;
  double rope_theta = 500000.0;
  RopeScaling rope_scaling;
  int64_t max_seq_len = 2048;  // RoPE table length; the trainer sets it to training.seq_len
  bool depth_init = true;      // wo/w2/w3 std shrinks with the layer index
  double dropout = 0.0;        // on the attention and FFN outputs, in training mode only
  // Qwen3's (torchtitan/models/qwen3): a head_dim of its own (unset: dim / n_heads), the SwiGLU
  // hidden size given directly (unset: Llama's rule), RMSNorm on each head's q and k, and the
  // output projection sharing the embedding's weight.
  std::optional<int64_t> head_dim_override;
  std::optional<int64_t> hidden_dim;
  bool qk_norm = false;
  bool tie_embeddings = false;
  // Mixture of experts (unset: every block's feed-forward is dense): the experts' SwiGLU hidden
  // size, and the blocks from n_dense_layers on have an MoE layer in place of the feed-forward.
  std::optional<MoEArgs> moe;
  int64_t moe_inter_dim = 768;
  int64_t n_dense_layers = 0;
  // DeepSeek-V3's attention (unset: grouped-query attention), and the final norm's eps where it
  // differs from norm_eps (DeepSeek-V3's nn.RMSNorm(dim) uses float32's machine epsilon).
  std::optional<MlaArgs> mla;
  std::optional<double> final_norm_eps;

  int64_t kv_heads() const { return n_kv_heads.value_or(n_heads); }
  // A query's (and key's) width per head: MLA's nope + rope parts.
  int64_t head_dim() const {
    return mla ? mla->qk_head_dim() : head_dim_override.value_or(dim / n_heads);
  }
  // q/k plus v widths per head, as torchtitan counts attention FLOPs.
  int64_t attention_head_dims() const {
    return mla ? head_dim() + mla->v_head_dim : 2 * head_dim();
  }
  // SwiGLU hidden size: hidden_dim where set, else int(2 * 4 * dim / 3), times
  // ffn_dim_multiplier, rounded up to multiple_of.
  int64_t ffn_hidden_dim() const;
  // Parameters of the model these args build (embedding and output included; a tied output
  // counted once, with the embedding).
  int64_t num_params() const;
  int64_t num_embedding_params() const { return vocab_size * dim; }
  // Whether block `layer` has an MoE layer.
  bool is_moe_layer(int64_t layer) const { return moe && layer >= n_dense_layers; }
  // The parameters a token computes with (torchtitan's get_moe_model_nparams_and_flops): all but
  // the routed experts' not chosen, counted as experts x top_k / num_experts (num_params() for a
  // dense model).
  int64_t num_active_params() const;
};

}  // namespace titan
