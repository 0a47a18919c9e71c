// Warmup-stable-decay learning-rate schedule, the same factors torchtitan's gives.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace titan {

class LRSchedule {
 public:
  // Requires run_steps >= 1. As torchtitan, over `steps` = lr_scheduler.total_steps when set, else
  // `run_steps`: warmup is clamped to the steps; decay covers round(steps * decay_ratio) steps
  // (all steps after warmup when decay_ratio is unset), clamped so warmup + decay <= steps; the
  // stable phase gets one virtual extra step so the LR never reaches zero within them. Past them
  // (a run longer than total_steps) the decay's formula goes on, as torchtitan's does.
  LRSchedule(const LRSchedulerConfig& config, int64_t run_steps);

  // Multiplier of the peak LR for 1-based training step `step` (scheduler step step - 1).
  double factor(int64_t step) const;

  int64_t warmup_steps() const { return warmup_; }
  int64_t decay_steps() const { return decay_; }

 private:
  int64_t warmup_, stable_, decay_;
  DecayType decay_type_;
  double min_lr_factor_;
};

}  // namespace titan
