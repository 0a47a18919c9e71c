// The model's linear layers (no bias): y = x W^T, on ATen's matmul or, where the run asks for it
// (debug.cpu_linear = "onednn", util/onednn_sgemm.h), on oneDNN's sgemm.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "config/enums.h"

namespace titan {

// Which implementation a linear layer runs. They agree to float rounding, not bitwise.
enum class LinearKernel {
  kAten,    // torch::nn::Linear's forward (aten::linear): any dtype, device or backend
  kOnednn,  // oneDNN's dnnl_sgemm for the forward and both gradients: float32 on the CPU
};
// kOnednn for float32 CPU inputs when linear_backend() is kOnednn and CPU autocast is off; else
// kAten.
LinearKernel linear_kernel_for(at::ScalarType dtype, at::Device device);
// to_string spells it: "aten", "onednn".
template <>
const std::vector<std::string>& enum_names<LinearKernel>();
// For the start-up line and fingerprint.log's header: "aten", or "onednn 2.6.3" (the version
// decides bits).
std::string linear_kernel_name(LinearKernel kernel);

// Requires x (..., in) and layer's weight (out, in) with no bias. Returns (..., out) = x W^T,
// differentiable in x and W, with the kernel linear_kernel_for picks. The ATen kernel is the
// layer's own forward, unchanged; the oneDNN one is seen by observers (the op trace, the precision
// probe) as one op, "titan::linear", with inputs (x, W).
at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x);
// The same with a weight (out, in) that no Linear holds (a tied output projection). Not an
// overload of linear: at::linear(input, weight) would be found beside it.
at::Tensor linear_by_weight(const at::Tensor& weight, const at::Tensor& x);

// The oneDNN implementation (tests compare it with ATen's). Throws unless linear_kernel_for picks
// it for x, W (out, in) matches x's last dim, and neither is empty.
at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& weight);

}  // namespace titan
