// A run's steps on its model, and their replay: the engine executes steps (run_step with the
// run's options), owns the train state (step, tokens seen, the data position, the generators)
// and sets it one way (apply), and keeps and restores snapshots, so that a step can be executed
// again from the state before it and compute the same bits (the rerun check), or its state and
// batch handed to another execution (precision attribution).
#pragma once

#include <torch/optim/adamw.h>

#include <cstdint>
#include <vector>

#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "data/step_batches.h"
#include "optim/lr_schedule.h"
#include "step/step.h"

namespace titan {

class StepEngine {
 public:
  // Requires: target.parallel, everything `target` points to, `optimizer` (target.optimizer, the
  // parallel component's) and `batches` outlive the engine. `tokens_per_step` counts all ranks.
  StepEngine(StepTarget target, torch::optim::AdamW& optimizer, StepOptions options,
             StepBatches& batches, LRSchedule schedule, double base_lr, int64_t tokens_per_step);

  // Steps completed (the next is step() + 1), and the tokens they trained on over all ranks.
  int64_t step() const { return step_; }
  int64_t tokens_seen() const { return tokens_seen_; }
  // The learning rate of step `step`: the schedule's at step - origin (see set_schedule_origin).
  double lr(int64_t step) const;
  // The step the schedule counts from (0; a resume that leaves the scheduler out sets it).
  void set_schedule_origin(int64_t origin) { schedule_origin_ = origin; }
  const LRSchedule& schedule() const { return schedule_; }

  // The train state (the generators read now), and the one way to set it.
  TrainState state() const;
  void apply(const TrainState& state);
  // In-memory copies of everything the next steps depend on (under FSDP this rank's shards and
  // their AdamW state): the steps that follow a restore reproduce those that followed the
  // snapshot, bit for bit.
  Snapshot snapshot() const;
  void restore(const Snapshot& snapshot);

  // This rank's micro-batches of the next step (the data position moves past it).
  std::vector<Batch> next_batches() { return batches_.next_step(); }

  // Executes step `step` on `batches` from the current state with the run's options, `observers`
  // watching. A nondeterministic op under debug.deterministic and a recompute mismatch are named
  // with the step (CheckFailure).
  StepOutcome execute(int64_t step, const std::vector<Batch>& batches,
                      const std::vector<StepObserver*>& observers, StepMode mode = StepMode::kTrain,
                      bool max_loss_over_ranks = false);

  // The run's step `step` is done: the step count and the tokens seen move on.
  void complete(int64_t step);

  // tensors_checksum of the model's parameters (under FSDP from the shards: every rank calls
  // it).
  uint64_t params_checksum() const;
  // Checksum of every parameter's gradient as the last execution left them (under FSDP of the
  // full gradients, gathered one unit at a time: every rank calls it).
  uint64_t gradients_checksum() const;

  const StepOptions& options() const { return options_; }
  torch::optim::AdamW& optimizer() const { return optimizer_; }
  const StepTarget& target() const { return target_; }

 private:
  StepTarget target_;
  torch::optim::AdamW& optimizer_;
  StepOptions options_;
  StepBatches& batches_;
  LRSchedule schedule_;
  double base_lr_;
  int64_t tokens_per_step_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  int64_t schedule_origin_ = 0;
};

}  // namespace titan
