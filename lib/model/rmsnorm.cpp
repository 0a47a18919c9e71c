#include "model/rmsnorm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <vector>

#include "model/observed_op.h"
#include "model/rmsnorm_kernels.h"

namespace titan {
namespace {

namespace rk = rmsnorm_kernels;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per parallel task: a few hundred KB of the debug model's (tokens, 256) activations.
constexpr int64_t kGrainRows = 128;

bool fused_applies(int64_t dim, at::ScalarType dtype, at::Device device) {
  return fused_kernels_enabled() && device.is_cpu() && dtype == at::kFloat && dim >= 8 &&
         dim % 8 == 0;
}

// The weight gradient: partial sums of fixed row chunks, computed in parallel, then added up in a
// fixed order, so that the result does not depend on the thread count.
at::Tensor weight_gradient(VectorIsa isa, const float* x, const float* rstd, const float* gy,
                           int64_t rows, int64_t C, const at::TensorOptions& options) {
  const auto chunk_sum = isa == VectorIsa::kAvx512 ? rk::avx512::backward_weight_chunk
                                                   : rk::avx2::backward_weight_chunk;
  const int64_t chunks = (rows + rk::kWeightChunkRows - 1) / rk::kWeightChunkRows;
  std::vector<float> parts(static_cast<size_t>(std::max<int64_t>(chunks, 1) * C));  // zeros
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t first = k * rk::kWeightChunkRows;
      const int64_t count = std::min(rk::kWeightChunkRows, rows - first);
      chunk_sum(x + first * C, rstd + first, gy + first * C, count, C, parts.data() + k * C);
    }
  });
  // Pairwise, so that rounding grows with log(chunks) rather than chunks.
  for (int64_t stride = 1; stride < chunks; stride *= 2)
    for (int64_t k = 0; k + stride < chunks; k += 2 * stride)
      for (int64_t c = 0; c < C; ++c)
        parts[static_cast<size_t>(k * C + c)] += parts[static_cast<size_t>((k + stride) * C + c)];
  auto dw = at::empty({C}, options);
  std::copy(parts.begin(), parts.begin() + C, dw.data_ptr<float>());
  return dw;
}

struct FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                               double eps) {
    return {observed_as_one_op("titan::rms_norm", {x, weight, eps}, [&] {
      at::DisableRecordFunctionGuard unobserved;
      auto xc = x.contiguous(), wc = weight.contiguous();
      const int64_t C = xc.size(-1), rows = xc.numel() / C;
      auto y = at::empty(xc.sizes(), xc.options());
      auto rstd = at::empty({rows}, xc.options());
      const float *xp = xc.data_ptr<float>(), *wp = wc.data_ptr<float>();
      float *yp = y.data_ptr<float>(), *rp = rstd.data_ptr<float>();
      const VectorIsa isa = fused_kernel_isa();
      const auto kernel = isa == VectorIsa::kAvx512 ? rk::avx512::forward : rk::avx2::forward;
      at::parallel_for(0, rows, kGrainRows, [&](int64_t begin, int64_t end) {
        kernel(xp + begin * C, wp, static_cast<float>(eps), end - begin, C, yp + begin * C,
               rp + begin);
      });
      ctx->save_for_backward({xc, wc, rstd});
      ctx->saved_data["isa"] = static_cast<int64_t>(isa);  // the backward runs the same build
      return y;
    })};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::DisableRecordFunctionGuard unobserved;
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &rstd = saved[2];
    auto gy = grad_outputs[0].contiguous();
    const int64_t C = x.size(-1), rows = x.numel() / C;
    auto dx = at::empty(x.sizes(), x.options());
    const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>(),
                *rp = rstd.data_ptr<float>(), *gp = gy.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    const auto isa = static_cast<VectorIsa>(ctx->saved_data["isa"].toInt());
    const auto kernel =
        isa == VectorIsa::kAvx512 ? rk::avx512::backward_input : rk::avx2::backward_input;
    at::parallel_for(0, rows, kGrainRows, [&](int64_t begin, int64_t end) {
      kernel(xp + begin * C, wp, rp + begin, gp + begin * C, end - begin, C, dxp + begin * C);
    });
    return {dx, weight_gradient(isa, xp, rp, gp, rows, C, weight.options()), at::Tensor()};
  }
};

}  // namespace

RmsNormKernel rms_norm_kernel_for(int64_t dim, at::ScalarType dtype, at::ScalarType weight_dtype,
                                  at::Device device) {
  if (!fused_applies(dim, dtype, device) || weight_dtype != dtype) return RmsNormKernel::kAten;
  return fused_kernel_isa() == VectorIsa::kAvx512 ? RmsNormKernel::kFusedAvx512
                                                  : RmsNormKernel::kFusedAvx2;
}

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() >= 1 && fused_applies(x.size(-1), x.scalar_type(), x.device()),
              "fused_rms_norm: needs float CPU input with a last dim that is a multiple of 8, on "
              "a CPU with AVX2 and FMA");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1) &&
                  weight.scalar_type() == x.scalar_type() && weight.device() == x.device(),
              "fused_rms_norm: weight must be (x's last dim) with x's dtype and device");
  return FusedRmsNorm::apply(x, weight, eps)[0];
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  switch (rms_norm_kernel_for(x.size(-1), x.scalar_type(), weight.scalar_type(), x.device())) {
    case RmsNormKernel::kFusedAvx2:
    case RmsNormKernel::kFusedAvx512:
      return fused_rms_norm(x, weight, eps);
    case RmsNormKernel::kAten:
      break;
  }
  // The same one op whatever the kernel, so that traces of runs on different kernels align.
  return observed_as_one_op("titan::rms_norm", {x, weight, eps}, [&] {
    // Normalized in float32 (torchtitan's), or in float64 for a float64 input.
    auto xf = x.to(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return normed.to(x.scalar_type()) * weight;
  });
}

TITAN_ENUM_NAMES(RmsNormKernel, "fused_avx2_fma", "fused_avx512", "aten")

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) { return rms_norm(x, weight, eps_); }

}  // namespace titan
