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

// A parameter group's hyperparameters (libtorch 1.13's optimizer load() does not restore them).
struct AdamWGroupSnapshot {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool amsgrad = false;
};

struct Snapshot {
  TrainState state;
  std::vector<at::Tensor> module_tensors;                    // parameters, then buffers
  std::vector<std::optional<AdamWParamSnapshot>> optimizer;  // per parameter; none before step 1
  std::vector<AdamWGroupSnapshot> groups;                    // per parameter group
};

// kClone copies every tensor (the snapshot outlives later steps); kShare references the live
// tensors (for writing them out at once, as a checkpoint save does).
enum class SnapshotCopy { kClone, kShare };

// The current values. Requires: `optimizer` holds `module`'s parameters.
Snapshot take_snapshot(const torch::nn::Module& module, const torch::optim::AdamW& optimizer,
                       const TrainState& state, SnapshotCopy copy = SnapshotCopy::kClone);

// Copies the snapshot's values back into `module` (in place) and `optimizer`. The snapshot stays
// valid, so it can be restored again. Requires: the same module and optimizer it was taken from.
void restore_snapshot(const Snapshot& snapshot, torch::nn::Module& module,
                      torch::optim::AdamW& optimizer);

// The same for a model whose state is `tensors` instead of a module's parameters and buffers
// (FSDP: this rank's shards and the model's buffers), in the same order at both calls.
Snapshot take_snapshot(const std::vector<at::Tensor>& tensors, const torch::optim::AdamW& optimizer,
                       const TrainState& state, SnapshotCopy copy = SnapshotCopy::kClone);
void restore_snapshot(const Snapshot& snapshot, const std::vector<at::Tensor>& tensors,
                      torch::optim::AdamW& optimizer);

}  // namespace titan
