#include "checkpoint/snapshot.h"

#include <torch/torch.h>

#include "optim/optimizer.h"

namespace titan {
namespace {

std::vector<at::Tensor> module_tensors(const torch::nn::Module& module) {
  std::vector<at::Tensor> tensors = module.parameters();
  for (const auto& b : module.buffers()) tensors.push_back(b);
  return tensors;
}

at::Tensor clone_or_undefined(const at::Tensor& t) {
  return t.defined() ? t.detach().clone() : at::Tensor();
}

AdamWGroupSnapshot group_snapshot(const torch::optim::AdamWOptions& o) {
  return {o.lr(),  std::get<0>(o.betas()), std::get<1>(o.betas()),
          o.eps(), o.weight_decay(),       o.amsgrad()};
}

void restore_group(const AdamWGroupSnapshot& g, torch::optim::AdamWOptions& o) {
  o.lr(g.lr).betas({g.beta1, g.beta2}).eps(g.eps).weight_decay(g.weight_decay).amsgrad(g.amsgrad);
}

}  // namespace

Snapshot take_snapshot(const torch::nn::Module& module, const torch::optim::AdamW& optimizer,
                       const TrainState& state, SnapshotCopy copy) {
  return take_snapshot(module_tensors(module), optimizer, state, copy);
}

void restore_snapshot(const Snapshot& s, torch::nn::Module& module,
                      torch::optim::AdamW& optimizer) {
  restore_snapshot(s, module_tensors(module), optimizer);
}

Snapshot take_snapshot(const std::vector<at::Tensor>& tensors, const torch::optim::AdamW& optimizer,
                       const TrainState& state, SnapshotCopy copy) {
  torch::NoGradGuard no_grad;
  auto copy_of = [copy](const at::Tensor& t) {
    return copy == SnapshotCopy::kClone ? clone_or_undefined(t) : t;
  };
  Snapshot s;
  s.state = state;
  for (const auto& t : tensors) s.module_tensors.push_back(copy_of(t.detach()));
  const auto& states = optimizer.state();
  for (const auto& group : optimizer.param_groups()) {
    s.groups.push_back(
        group_snapshot(static_cast<const torch::optim::AdamWOptions&>(group.options())));
    for (const auto& p : group.params()) {
      auto it = states.find(adamw_state_key(p));
      if (it == states.end()) {
        s.optimizer.emplace_back();
        continue;
      }
      const auto& ps = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      s.optimizer.push_back(AdamWParamSnapshot{ps.step(), copy_of(ps.exp_avg()),
                                               copy_of(ps.exp_avg_sq()),
                                               copy_of(ps.max_exp_avg_sq())});
    }
  }
  return s;
}

void restore_snapshot(const Snapshot& s, const std::vector<at::Tensor>& tensors,
                      torch::optim::AdamW& optimizer) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tensors.size() == s.module_tensors.size(), "snapshot of another module");
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(s.module_tensors[i]);

  auto& states = optimizer.state();
  size_t index = 0;
  auto& groups = optimizer.param_groups();
  TORCH_CHECK(groups.size() == s.groups.size(), "snapshot of another optimizer");
  for (size_t g = 0; g < groups.size(); ++g) {
    restore_group(s.groups[g], static_cast<torch::optim::AdamWOptions&>(groups[g].options()));
    for (const auto& p : groups[g].params()) {
      TORCH_CHECK(index < s.optimizer.size(), "snapshot of another optimizer");
      const auto& saved = s.optimizer[index++];
      const auto key = adamw_state_key(p);
      if (!saved) {
        states.erase(key);
        continue;
      }
      auto restored = std::make_unique<torch::optim::AdamWParamState>();
      restored->step(saved->step);
      restored->exp_avg(clone_or_undefined(saved->exp_avg));
      restored->exp_avg_sq(clone_or_undefined(saved->exp_avg_sq));
      restored->max_exp_avg_sq(clone_or_undefined(saved->max_exp_avg_sq));
      states[key] = std::move(restored);
    }
  }
}

}  // namespace titan
