// Causal scaled dot-product attention.
//
// On CUDA (libtorch >= 2.0): at::scaled_dot_product_attention (flash / memory-efficient kernels).
// On the CPU titan-train's own kernels, on every libtorch: 1.13 has no fused kernel, 2.6's CPU
// flash kernel is 20-70x slower at seq_len 512 than at 256, and the naive q@k^T, mask, softmax, @v
// spends most of a CPU step writing and re-reading full (T, T) score matrices. The fused kernels
// (attention_kernels.h) take groups of query rows from the scores through the softmax to the
// product with v in registers and L1, save 2 floats a query row, and compute the probabilities
// again in the backward. The blocked ATen version (1.13 where the fused kernels do not apply)
// walks query blocks and multiplies each only with the keys it may see, so the masked upper
// triangle is never computed, folds the scale and the mask into one baddbmm, softmaxes in place,
// and uses a hand-written backward that reuses the saved probabilities.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "config/enums.h"

namespace titan {

// Which implementation causal_attention runs. They agree to float rounding, not bitwise.
enum class AttentionKernel {
  kFusedAvx2,    // attention_kernels.h: float on an AVX2+FMA CPU, D a multiple of 8 (any libtorch)
  kFusedAvx512,  // the same kernels (same bits) at AVX-512's width, where the CPU has it
  kBlockedAten,  // blocked_causal_attention: libtorch 1.13 otherwise
  kTorchSdpa,    // at::scaled_dot_product_attention: libtorch 2.x otherwise (CUDA among them)
};
AttentionKernel attention_kernel_for(int64_t head_dim, at::ScalarType dtype, at::Device device);
// to_string spells it for logs and fingerprint.log's header: "fused_avx2_fma", "fused_avx512",
// "blocked_aten", "torch_sdpa".
template <>
const std::vector<std::string>& enum_names<AttentionKernel>();

// q: (B, H, T, D), k and v: (B, H, T, D) with the kv heads already repeated to H.
// Returns (B, H, T, D): softmax(q k^T / sqrt(D) + causal mask) v. Differentiable.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The blocked implementation above, callable on any libtorch version (tests compare it with the
// naive formula). `block` is the query block length.
at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    int64_t block = 128);

// The fused implementation, at fused_kernel_isa()'s width (tests compare it with the others).
// Requires what attention_kernel_for checks for the fused kernels, and q, k, v of one shape;
// throws otherwise.
// Its output is contiguous; its gradients are (B, H, T, D) views of tensors laid out (B, T, H, D).
at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace titan
