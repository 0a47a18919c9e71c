#include "deepseek_v3/attention.h"

#include <algorithm>
#include <cmath>

#include "model/linear.h"
#include "model/rotary.h"

namespace titan::deepseek_v3 {
namespace {

// The dimension at which `rotations` full turns fit in `max_seq_len` positions.
double correction_dim(double rotations, int64_t dim, double base, int64_t max_seq_len) {
  return static_cast<double>(dim) *
         std::log(static_cast<double>(max_seq_len) / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

at::Tensor precompute_freqs_cis(const ModelArgs& args) {
  const MlaArgs& m = *args.mla;
  const int64_t dim = m.qk_rope_head_dim;
  const double base = args.rope_theta;
  auto freqs = 1.0 / at::pow(base, at::arange(0, dim, 2, at::kFloat) / static_cast<float>(dim));
  if (args.max_seq_len > m.original_seq_len) {
    const int64_t low = std::max<int64_t>(static_cast<int64_t>(std::floor(correction_dim(
                                              m.beta_fast, dim, base, m.original_seq_len))),
                                          0);
    double high = std::min<int64_t>(
        static_cast<int64_t>(std::ceil(correction_dim(m.beta_slow, dim, base, m.original_seq_len))),
        dim - 1);
    if (static_cast<double>(low) == high) high += 0.001;
    auto ramp = ((at::arange(dim / 2, at::kFloat) - static_cast<double>(low)) /
                 (high - static_cast<double>(low)))
                    .clamp(0, 1);
    auto smooth = 1 - ramp;
    freqs = freqs / m.rope_factor * (1 - smooth) + freqs * smooth;
  }
  auto angles = at::outer(at::arange(args.max_seq_len, at::kLong), freqs);  // (T, R/2) float32
  return at::polar(at::ones_like(angles), angles);
}

double softmax_scale(const ModelArgs& args) {
  double scale = 1.0 / std::sqrt(static_cast<double>(args.mla->qk_head_dim()));
  if (args.max_seq_len > args.mla->original_seq_len) {
    const double mscale = 0.1 * args.mla->mscale * std::log(args.mla->rope_factor) + 1.0;
    scale = scale * mscale * mscale;
  }
  return scale;
}

AttentionImpl::AttentionImpl(const ModelArgs& args)
    : mla_(*args.mla), n_heads_(args.n_heads), scale_(softmax_scale(args)) {
  const int64_t qk = mla_.qk_head_dim();
  if (mla_.q_lora_rank == 0) {
    wq = register_module("wq", linear_layer(args.dim, n_heads_ * qk));
  } else {
    wq_a = register_module("wq_a", linear_layer(args.dim, mla_.q_lora_rank));
    q_norm = register_module("q_norm", RMSNorm(mla_.q_lora_rank, args.norm_eps));
    wq_b = register_module("wq_b", linear_layer(mla_.q_lora_rank, n_heads_ * qk));
  }
  wkv_a =
      register_module("wkv_a", linear_layer(args.dim, mla_.kv_lora_rank + mla_.qk_rope_head_dim));
  kv_norm = register_module("kv_norm", RMSNorm(mla_.kv_lora_rank, args.norm_eps));
  wkv_b = register_module(
      "wkv_b",
      linear_layer(mla_.kv_lora_rank, n_heads_ * (mla_.qk_nope_head_dim + mla_.v_head_dim)));
  wo = register_module("wo", linear_layer(n_heads_ * mla_.v_head_dim, args.dim));
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& freqs_cis) {
  const auto B = x.size(0), T = x.size(1), H = n_heads_;
  const int64_t N = mla_.qk_nope_head_dim, R = mla_.qk_rope_head_dim, V = mla_.v_head_dim;
  auto q = wq ? linear(wq, x) : linear(wq_b, q_norm(linear(wq_a, x)));
  q = q.view({B, T, H, N + R});
  auto q_pe = apply_rotary_emb(q.narrow(-1, N, R), freqs_cis);
  q = at::cat({q.narrow(-1, 0, N), q_pe}, -1);  // (B, T, H, N + R)
  auto kv = linear(wkv_a, x);                   // (B, T, L + R)
  auto k_pe = apply_rotary_emb(kv.narrow(-1, mla_.kv_lora_rank, R).unsqueeze(2), freqs_cis);
  kv = linear(wkv_b, kv_norm(kv.narrow(-1, 0, mla_.kv_lora_rank))).view({B, T, H, N + V});
  auto k = at::cat({kv.narrow(-1, 0, N), k_pe.expand({B, T, H, R})}, -1);  // (B, T, H, N + R)
  auto v = kv.narrow(-1, N, V);                                            // (B, T, H, V)
  auto out = scaled_causal_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                     scale_);  // (B, H, T, V)
  return linear(wo, out.transpose(1, 2).reshape({B, T, H * V}));
}

void AttentionImpl::init_weights(double init_std, const ParamInit& init) {
  const auto std_002 = [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); };
  init(wkv_a->weight, std_002);
  init(wkv_b->weight, std_002);
  if (wq) {
    init(wq->weight, std_002);
  } else {
    init(wq_a->weight, std_002);
    init(wq_b->weight, std_002);
  }
  init(wo->weight, [&](at::Tensor& t) { trunc_normal_(t, 0.0, init_std, -2.0, 2.0); });
  const auto ones = [](at::Tensor& t) { t.fill_(1.0); };
  init(kv_norm->weight, ones);
  if (q_norm) init(q_norm->weight, ones);
}

}  // namespace titan::deepseek_v3
