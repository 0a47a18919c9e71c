#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace titan {

LRSchedule::LRSchedule(const LRSchedulerConfig& config, int64_t run_steps)
    : decay_type_(config.decay_type), min_lr_factor_(config.min_lr_factor) {
  // lr_scheduler.total_steps decouples the schedule's length from the run's.
  const int64_t training_steps = config.total_steps.value_or(run_steps);
  warmup_ = std::min(config.warmup_steps, training_steps);
  if (config.decay_ratio) {
    // Python's round(): halves go to the even neighbour, as nearbyint does by default.
    decay_ = static_cast<int64_t>(std::nearbyint(training_steps * *config.decay_ratio));
    decay_ = std::min(decay_, training_steps - warmup_);
  } else {
    decay_ = training_steps - warmup_;
  }
  stable_ = training_steps + 1 - warmup_ - decay_;
}

double LRSchedule::factor(int64_t step) const {
  const int64_t s = step - 1;  // torchtitan's 0-based scheduler step
  if (s < warmup_) return static_cast<double>(s + 1) / warmup_;
  if (s < warmup_ + stable_) return 1.0;
  const double progress = static_cast<double>(s + 1 - warmup_ - stable_) / decay_;
  double adjustment = 0;
  switch (decay_type_) {
    case DecayType::kLinear:
      adjustment = 1.0 - progress;
      break;
    case DecayType::kSqrt:
      adjustment = 1.0 - std::sqrt(progress);
      break;
    case DecayType::kCosine:
      adjustment = 0.5 * (1.0 + std::cos(M_PI * progress));
      break;
  }
  return min_lr_factor_ + (1.0 - min_lr_factor_) * adjustment;
}

}  // namespace titan
