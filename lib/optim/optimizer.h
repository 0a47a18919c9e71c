// AdamW as torchtitan configures it, and gradient clipping.
#pragma once

#include <torch/optim/adamw.h>

#include <memory>
#include <vector>

#include "config/config.h"

namespace titan {

// AdamW over `params` with [optimizer] lr, betas, eps and weight_decay (one group, like
// torchtitan v0.2.2: the same decay for every parameter).
std::unique_ptr<torch::optim::AdamW> build_optimizer(const std::vector<at::Tensor>& params,
                                                     const OptimizerConfig& config);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// Scales gradients so their total L2 norm is at most max_norm; returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace titan
