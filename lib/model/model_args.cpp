#include "model/model_args.h"

namespace titan {

int64_t ModelArgs::ffn_hidden_dim() const {
  if (hidden_dim) return *hidden_dim;
  int64_t hidden = static_cast<int64_t>(2.0 * (4 * dim) / 3.0);
  if (ffn_dim_multiplier) hidden = static_cast<int64_t>(*ffn_dim_multiplier * hidden);
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

namespace {
// An MoE layer's parameters: the router's gate, the routed experts, the shared experts.
struct MoEParams {
  int64_t router = 0, routed = 0, shared = 0;
};
MoEParams moe_params(const ModelArgs& a) {
  const MoEArgs& m = *a.moe;
  MoEParams p;
  p.router = m.num_experts * a.dim + (m.gate_bias ? m.num_experts : 0);
  p.routed = m.num_experts * 3 * a.dim * a.moe_inter_dim;
  p.shared = 3 * a.dim * a.moe_inter_dim * m.num_shared_experts;
  return p;
}

// An attention's parameters: grouped-query attention's wq, wk, wv, wo (and q/k norms), or
// MLA's.
int64_t attention_params(const ModelArgs& a) {
  const int64_t hd = a.head_dim();
  if (!a.mla) {
    return a.dim * a.n_heads * hd + 2 * a.dim * a.kv_heads() * hd + a.n_heads * hd * a.dim +
           (a.qk_norm ? 2 * hd : 0);
  }
  const MlaArgs& m = *a.mla;
  const int64_t q = m.q_lora_rank == 0
                        ? a.dim * a.n_heads * hd
                        : a.dim * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a.n_heads * hd;
  const int64_t kv = a.dim * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                     m.kv_lora_rank * a.n_heads * (m.qk_nope_head_dim + m.v_head_dim);
  return q + kv + a.n_heads * m.v_head_dim * a.dim;
}

// Parameters of the model, each MoE layer's routed experts counted whole or (`active`) as the
// share top_k / num_experts a token computes with.
int64_t params_with_routed_share(const ModelArgs& a, bool active) {
  const int64_t attention = attention_params(a);
  const int64_t norms = 2 * a.dim;  // attention_norm, ffn_norm
  int64_t blocks = 0;
  for (int64_t layer = 0; layer < a.n_layers; ++layer) {
    blocks += attention + norms;
    if (!a.is_moe_layer(layer)) {
      blocks += 3 * a.dim * a.ffn_hidden_dim();
      continue;
    }
    const MoEParams p = moe_params(a);
    const int64_t routed = active ? p.routed * a.moe->top_k / a.moe->num_experts : p.routed;
    blocks += p.router + routed + p.shared;
  }
  const int64_t output = a.tie_embeddings ? 0 : a.dim * a.vocab_size;
  return a.vocab_size * a.dim + blocks + a.dim + output;  // + norm, output
}
}  // namespace

int64_t ModelArgs::num_params() const { return params_with_routed_share(*this, false); }

int64_t ModelArgs::num_active_params() const { return params_with_routed_share(*this, true); }

}  // namespace titan
