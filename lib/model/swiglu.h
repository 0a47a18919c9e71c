// SwiGLU's gate: silu(a) * b, where a = w1(x) and b = w3(x) in Llama's feed-forward.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "config/enums.h"

namespace titan {

// Which implementation swiglu runs. They agree to float rounding, not bitwise.
enum class SwigluKernel {
  kFusedAvx2,    // swiglu_kernels.h: float on a CPU with AVX2+FMA, one pass forward and backward
  kFusedAvx512,  // the same (same bits) at AVX-512's width, where the CPU has it
  kAten,         // at::silu(a) * b: any other dtype, device or CPU
};
SwigluKernel swiglu_kernel_for(at::ScalarType dtype, at::Device device);
// to_string spells it for logs and fingerprint.log's header: "fused_avx2_fma", "fused_avx512",
// "aten".
template <>
const std::vector<std::string>& enum_names<SwigluKernel>();

// Requires a and b of one shape, dtype and device. Returns silu(a) * b, differentiable in a and b,
// with the kernel swiglu_kernel_for picks.
at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b);

// The fused implementation, at fused_kernel_isa()'s width (tests compare it with ATen's). Throws
// unless swiglu_kernel_for picks a fused kernel for a, and a and b have one shape. Observers (the
// recompute checker's op trace, profilers) see it as one op, "titan::swiglu", with a contiguous
// output.
at::Tensor fused_swiglu(const at::Tensor& a, const at::Tensor& b);

}  // namespace titan
