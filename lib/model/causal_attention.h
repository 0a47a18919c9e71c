// Causal scaled dot-product attention.
//
// libtorch >= 2.0: at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA).
// libtorch 1.13 has no fused kernel, and the naive q@k^T, mask, softmax, @v spends most of a CPU
// step writing and re-reading full (T, T) score matrices. This version walks query blocks and
// multiplies each only with the keys it may see, so the masked upper triangle is never computed,
// folds the scale and the mask into one baddbmm, softmaxes in place, and uses a hand-written
// backward that reuses the saved probabilities.
#pragma once

#include <ATen/ATen.h>

namespace titan {

// q: (B, H, T, D), k and v: (B, H, T, D) with the kv heads already repeated to H.
// Returns (B, H, T, D): softmax(q k^T / sqrt(D) + causal mask) v. Differentiable.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The blocked implementation above, callable on any libtorch version (tests compare it with the
// naive formula). `block` is the query block length.
at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    int64_t block = 128);

}  // namespace titan
