#include "optim/optimizer.h"

#include <torch/nn/utils/clip_grad.h>

namespace titan {

std::unique_ptr<torch::optim::AdamW> build_optimizer(const std::vector<at::Tensor>& params,
                                                     const OptimizerConfig& config) {
  auto options = torch::optim::AdamWOptions(config.lr)
                     .betas({config.beta1, config.beta2})
                     .eps(config.eps)
                     .weight_decay(config.weight_decay);
  return std::make_unique<torch::optim::AdamW>(params, options);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
}

}  // namespace titan
