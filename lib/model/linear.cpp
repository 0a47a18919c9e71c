#include "model/linear.h"

#include <ATen/record_function.h>
#include <torch/autograd.h>

#include "model/observed_op.h"
#include "util/autocast.h"
#include "util/onednn_sgemm.h"

namespace titan {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Row-major operands as oneDNN's sgemm takes them: rows x cols, contiguous.
struct Matrix {
  const float* data;
  int64_t rows, cols;
};

// out (M, N) = op(a) op(b), each op a transpose or not; out is contiguous (M, N).
void sgemm(Matrix a, bool transpose_a, Matrix b, bool transpose_b, float* out) {
  const int64_t M = transpose_a ? a.cols : a.rows, K = transpose_a ? a.rows : a.cols;
  const int64_t N = transpose_b ? b.rows : b.cols;
  onednn_sgemm(transpose_a, transpose_b, M, N, K, a.data, a.cols, b.data, b.cols, out, N);
}

Matrix matrix(const at::Tensor& t) { return {t.data_ptr<float>(), t.size(0), t.size(1)}; }

struct OnednnLinear : public torch::autograd::Function<OnednnLinear> {
  // x (N, in), weight (out, in), both contiguous.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    at::DisableRecordFunctionGuard unobserved;
    auto y = at::empty({x.size(0), w.size(0)}, x.options());  // (N, out)
    sgemm(matrix(x), false, matrix(w), true, y.data_ptr<float>());
    ctx->save_for_backward({x, w});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::DisableRecordFunctionGuard unobserved;
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    auto dy = grad_outputs[0].contiguous();  // (N, out)
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty(x.sizes(), x.options());  // (N, in) = dy W
      sgemm(matrix(dy), false, matrix(w), false, dx.data_ptr<float>());
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty(w.sizes(), w.options());  // (out, in) = dy^T x
      sgemm(matrix(dy), true, matrix(x), false, dw.data_ptr<float>());
    }
    return {dx, dw};
  }
};

}  // namespace

LinearKernel linear_kernel_for(at::ScalarType dtype, at::Device device) {
  const bool applies = linear_backend() == LinearBackend::kOnednn && device.is_cpu() &&
                       dtype == at::kFloat && !autocast_enabled(c10::kCPU);
  return applies ? LinearKernel::kOnednn : LinearKernel::kAten;
}

at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(linear_kernel_for(x.scalar_type(), x.device()) == LinearKernel::kOnednn &&
                  weight.scalar_type() == x.scalar_type() && weight.device() == x.device(),
              "onednn_linear: needs float32 CPU tensors, with debug.cpu_linear = \"onednn\"");
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1) && x.numel() > 0 &&
                  weight.numel() > 0,
              "onednn_linear: x (..., in) and weight (out, in) must match and not be empty");
  auto out_sizes = x.sizes().vec();
  out_sizes.back() = weight.size(0);
  return observed_as_one_op("titan::linear", {x, weight}, [&] {
    auto rows = x.reshape({-1, x.size(-1)}).contiguous();  // (N, in)
    return OnednnLinear::apply(rows, weight.contiguous())[0].view(out_sizes);
  });
}

at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x) {
  if (linear_kernel_for(x.scalar_type(), x.device()) == LinearKernel::kOnednn &&
      layer->weight.scalar_type() == at::kFloat && !layer->bias.defined() && x.numel() > 0)
    return onednn_linear(x, layer->weight);
  return layer.ptr()->forward(x);
}

at::Tensor linear_by_weight(const at::Tensor& weight, const at::Tensor& x) {
  if (linear_kernel_for(x.scalar_type(), x.device()) == LinearKernel::kOnednn &&
      weight.scalar_type() == at::kFloat && x.numel() > 0)
    return onednn_linear(x, weight);
  return at::linear(x, weight);
}

TITAN_ENUM_NAMES(LinearKernel, "aten", "onednn")

std::string linear_kernel_name(LinearKernel kernel) {
  if (kernel == LinearKernel::kAten) return to_string(kernel);
  return to_string(kernel) + " " + onednn_library().version;
}

}  // namespace titan
