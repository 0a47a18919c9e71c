// RMSNorm: x / sqrt(mean(x^2, last dim) + eps) * weight, as Llama normalizes.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "config/enums.h"

namespace titan {

// Which implementation rms_norm runs. They agree to float rounding, not bitwise.
enum class RmsNormKernel {
  kFusedAvx2,    // rmsnorm_kernels.h: float on a CPU with AVX2+FMA, dim a multiple of 8
  kFusedAvx512,  // the same (same bits) at AVX-512's width, where the CPU has it
  kAten,         // ATen's ops: any other dtype, device, CPU or dim
};
// The kernel rms_norm runs for input of last dim `dim` and dtype `dtype` with a weight of
// `weight_dtype` on `device`.
RmsNormKernel rms_norm_kernel_for(int64_t dim, at::ScalarType dtype, at::ScalarType weight_dtype,
                                  at::Device device);
// to_string spells it for logs and fingerprint.log's header: "fused_avx2_fma", "fused_avx512",
// "aten".
template <>
const std::vector<std::string>& enum_names<RmsNormKernel>();

// Requires weight of shape (x's last dim). Differentiable in x and weight; the output has x's
// dtype. Runs the kernel rms_norm_kernel_for picks.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The fused implementation, at fused_kernel_isa()'s width (tests compare it with ATen's). Throws
// unless rms_norm_kernel_for picks a fused kernel for x and weight, and weight has x's device and
// last dim.
// Observers (the recompute checker's op trace, profilers) see it as one op, "titan::rms_norm".
at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The module: a weight of `dim` ones (torchtitan's init fills it with ones again).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);  // (..., D) -> (..., D)
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace titan
