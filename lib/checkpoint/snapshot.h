// An in-memory copy of everything a run's next steps depend on: the model's parameters and
// buffers, AdamW's per-parameter state and its groups' learning rates, and the TrainState.
//
// Restoring a snapshot and running the same steps again reproduces them bit for bit (same device
// and thread count). The checkpoint and rerun features build on this pair.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <optional>
#include <vector>

#include "checkpoint/train_state.h"

namespace titan {

struct AdamWParamSnapshot {
  int64_t step = 0;
  at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;  // max_exp_avg_sq: amsgrad only
};

struct Snapshot {
  TrainState state;
  std::vector<at::Tensor> module_tensors;                    // parameters, then buffers
  std::vector<std::optional<AdamWParamSnapshot>> optimizer;  // per parameter; none before step 1
  std::vector<double> group_lr;                              // per parameter group
};

// Copies (clones) of the current values. Requires: `optimizer` holds `module`'s parameters.
Snapshot take_snapshot(const torch::nn::Module& module, const torch::optim::AdamW& optimizer,
                       const TrainState& state);

// Copies the snapshot's values back into `module` (in place) and `optimizer`. The snapshot stays
// valid, so it can be restored again. Requires: the same module and optimizer it was taken from.
void restore_snapshot(const Snapshot& snapshot, torch::nn::Module& module,
                      torch::optim::AdamW& optimizer);

}  // namespace titan
