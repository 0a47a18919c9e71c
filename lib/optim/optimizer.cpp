#include "optim/optimizer.h"

#include <torch/nn/utils/clip_grad.h>

#include <sstream>
#include <string>

#include "optim/fused_adamw.h"
#include "util/cpu_features.h"

namespace titan {
namespace {

// A template, so that only the branch for this libtorch's key type is compiled.
template <class Key>
Key state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;
    address << p.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

}  // namespace

AdamWKernel adamw_kernel_for(at::Device device) {
  if (!device.is_cpu() || !fused_kernels_enabled()) return AdamWKernel::kTorch;
  return fused_kernel_isa() == VectorIsa::kAvx512 ? AdamWKernel::kFusedAvx512
                                                  : AdamWKernel::kFusedAvx2;
}

AdamWKernel adamw_kernel_of(const torch::optim::AdamW& optimizer) {
  const auto* fused = dynamic_cast<const FusedAdamW*>(&optimizer);
  if (!fused) return AdamWKernel::kTorch;
  return fused->isa() == VectorIsa::kAvx512 ? AdamWKernel::kFusedAvx512 : AdamWKernel::kFusedAvx2;
}

std::unique_ptr<torch::optim::AdamW> build_optimizer(const std::vector<at::Tensor>& params,
                                                     const OptimizerConfig& config) {
  auto options = torch::optim::AdamWOptions(config.lr)
                     .betas({config.beta1, config.beta2})
                     .eps(config.eps)
                     .weight_decay(config.weight_decay);
  const at::Device device = params.empty() ? at::Device(at::kCPU) : params.front().device();
  if (adamw_kernel_for(device) != AdamWKernel::kTorch && fused_adamw_applies(params, options))
    return std::make_unique<FusedAdamW>(params, options);
  return std::make_unique<torch::optim::AdamW>(params, options);
}

UpdateMeasurer* update_measurer(torch::optim::AdamW& optimizer) {
  return dynamic_cast<FusedAdamW*>(&optimizer);
}

AdamWStateMap::key_type adamw_state_key(const at::Tensor& p) {
  return state_key<AdamWStateMap::key_type>(p);
}

void drop_gradients(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) const_cast<at::Tensor&>(p).mutable_grad() = at::Tensor();
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

at::Tensor gradient_norm_tensor(const std::vector<at::Tensor>& grads,
                                GradNormAccumulate accumulate) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& g : grads) {
    if (g.defined()) norms.push_back(one_gradient_norm(g, accumulate));
  }
  return total_of_norms(norms);
}

at::Tensor one_gradient_norm(const at::Tensor& grad, GradNormAccumulate accumulate) {
  torch::NoGradGuard no_grad;
  // kFloat64: each square and the sum in float64, without a float64 copy of the gradient.
  return accumulate == GradNormAccumulate::kFloat32
             ? grad.norm(2)
             : at::linalg_vector_norm(grad, 2, c10::nullopt, false, at::kDouble);
}

at::Tensor total_of_norms(const std::vector<at::Tensor>& norms) {
  TORCH_CHECK(!norms.empty(), "gradient_norm_tensor needs a gradient");
  // PyTorch's clip_grad_norm_: one gradient's norm as it is, several through stack(...).norm().
  return norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
}

double gradient_norm(const std::vector<at::Tensor>& grads, GradNormAccumulate accumulate) {
  for (const auto& g : grads) {
    if (g.defined()) return gradient_norm_tensor(grads, accumulate).item<double>();
  }
  return 0.0;
}

void clip_with_norm(const std::vector<at::Tensor>& grads, const at::Tensor& total_norm,
                    double max_norm, GradNormAccumulate accumulate) {
  torch::NoGradGuard no_grad;
  if (accumulate == GradNormAccumulate::kFloat32) {
    // clip_grad_norm_'s coefficient: a tensor in the norm's dtype, clamped to 1, always applied.
    const at::Tensor coef = at::clamp(max_norm / (total_norm + 1e-6), c10::nullopt, 1.0);
    for (const auto& g : grads) {
      if (g.defined()) g.mul_(coef);
    }
    return;
  }
  const double coef = max_norm / (total_norm.item<double>() + 1e-6);  // PyTorch's clip coefficient
  if (coef >= 1) return;
  for (const auto& g : grads) {
    if (g.defined()) g.mul_(coef);
  }
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      GradNormAccumulate accumulate) {
  if (accumulate == GradNormAccumulate::kFloat32) {
    return torch::nn::utils::clip_grad_norm_(params, max_norm);
  }
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  const double total = gradient_norm(grads, accumulate);
  clip_with_norm(grads, at::scalar_tensor(total, at::kDouble), max_norm, accumulate);
  return total;
}

TITAN_ENUM_NAMES(AdamWKernel, "fused_avx2_fma", "fused_avx512", "torch")

}  // namespace titan
