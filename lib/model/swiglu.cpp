#include "model/swiglu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include "model/observed_op.h"
#include "model/swiglu_kernels.h"

namespace titan {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements per task: large enough that a task outlasts the threads' start-up, small enough that
// the debug model's (tokens, hidden) tensors split over every core.
constexpr int64_t kGrain = 1 << 15;

bool fused_applies(at::ScalarType dtype, at::Device device) {
  return fused_kernels_enabled() && device.is_cpu() && dtype == at::kFloat;
}

// Calls fn(begin, end) on disjoint ranges of [0, n) in parallel. The kernels are elementwise, so
// the split does not change a bit.
template <typename Fn>
void for_each_range(int64_t n, const Fn& fn) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) { fn(begin, end); });
}

struct FusedSwiglu : public torch::autograd::Function<FusedSwiglu> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    return {observed_as_one_op("titan::swiglu", {a, b}, [&] {
      at::DisableRecordFunctionGuard unobserved;
      auto ac = a.contiguous(), bc = b.contiguous();
      auto out = at::empty(ac.sizes(), ac.options());
      const float *ap = ac.data_ptr<float>(), *bp = bc.data_ptr<float>();
      float* op = out.data_ptr<float>();
      const VectorIsa isa = fused_kernel_isa();
      const auto kernel = isa == VectorIsa::kAvx512 ? swiglu_kernels::avx512::forward
                                                    : swiglu_kernels::avx2::forward;
      for_each_range(ac.numel(), [&](int64_t begin, int64_t end) {
        kernel(ap + begin, bp + begin, end - begin, op + begin);
      });
      ctx->save_for_backward({ac, bc});
      ctx->saved_data["isa"] = static_cast<int64_t>(isa);  // the backward runs the same build
      return out;
    })};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::DisableRecordFunctionGuard unobserved;
    const auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &b = saved[1];
    auto g = grad_outputs[0].contiguous();
    auto da = at::empty(a.sizes(), a.options()), db = at::empty(b.sizes(), b.options());
    const float *ap = a.data_ptr<float>(), *bp = b.data_ptr<float>(), *gp = g.data_ptr<float>();
    float *dap = da.data_ptr<float>(), *dbp = db.data_ptr<float>();
    const auto kernel = static_cast<VectorIsa>(ctx->saved_data["isa"].toInt()) == VectorIsa::kAvx512
                            ? swiglu_kernels::avx512::backward
                            : swiglu_kernels::avx2::backward;
    for_each_range(a.numel(), [&](int64_t begin, int64_t end) {
      kernel(ap + begin, bp + begin, gp + begin, end - begin, dap + begin, dbp + begin);
    });
    return {da, db};
  }
};

}  // namespace

SwigluKernel swiglu_kernel_for(at::ScalarType dtype, at::Device device) {
  if (!fused_applies(dtype, device)) return SwigluKernel::kAten;
  return fused_kernel_isa() == VectorIsa::kAvx512 ? SwigluKernel::kFusedAvx512
                                                  : SwigluKernel::kFusedAvx2;
}

at::Tensor fused_swiglu(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(fused_applies(a.scalar_type(), a.device()),
              "fused_swiglu: needs float tensors on a CPU with AVX2 and FMA");
  TORCH_CHECK(
      a.sizes() == b.sizes() && b.scalar_type() == a.scalar_type() && b.device() == a.device(),
      "fused_swiglu: a and b must have one shape, dtype and device");
  return FusedSwiglu::apply(a, b)[0];
}

at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b) {
  switch (swiglu_kernel_for(a.scalar_type(), a.device())) {
    case SwigluKernel::kFusedAvx2:
    case SwigluKernel::kFusedAvx512:
      return fused_swiglu(a, b);
    case SwigluKernel::kAten:
      break;
  }
  // The same one op whatever the kernel, so that traces of runs on different kernels align.
  return observed_as_one_op("titan::swiglu", {a, b}, [&] { return at::silu(a) * b; });
}

TITAN_ENUM_NAMES(SwigluKernel, "fused_avx2_fma", "fused_avx512", "aten")

}  // namespace titan
