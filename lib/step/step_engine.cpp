#include "step/step_engine.h"

#include <stdexcept>

#include "ac/recompute.h"
#include "determinism/determinism.h"
#include "determinism/rng_state.h"

namespace titan {

StepEngine::StepEngine(StepTarget target, torch::optim::AdamW& optimizer, StepOptions options,
                       StepBatches& batches, LRSchedule schedule, double base_lr,
                       int64_t tokens_per_step)
    : target_(std::move(target)),
      optimizer_(optimizer),
      options_(options),
      batches_(batches),
      schedule_(schedule),
      base_lr_(base_lr),
      tokens_per_step_(tokens_per_step) {}

double StepEngine::lr(int64_t step) const {
  return base_lr_ * schedule_.factor(step - schedule_origin_);
}

TrainState StepEngine::state() const {
  TrainState s;
  s.step = step_;
  s.tokens_seen = tokens_seen_;
  s.loader = batches_.state();
  s.rng = capture_rng_state();
  return s;
}

void StepEngine::apply(const TrainState& s) {
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  batches_.load_state(s.loader);
  restore_rng_state(s.rng);
}

Snapshot StepEngine::snapshot() const { return target_.parallel->snapshot(state()); }

void StepEngine::restore(const Snapshot& snapshot) {
  target_.parallel->restore(snapshot);
  apply(snapshot.state);
}

StepOutcome StepEngine::execute(int64_t step, const std::vector<Batch>& batches,
                                const std::vector<StepObserver*>& observers, StepMode mode,
                                bool max_loss_over_ranks) {
  StepRequest request;
  request.step = step;
  request.batches = &batches;
  request.lr = lr(step);
  request.mode = mode;
  request.max_loss_over_ranks = max_loss_over_ranks;
  try {
    return fail_on_nondeterministic_op(
        step, [&] { return run_step(target_, options_, request, observers); });
  } catch (const ac::RecomputeMismatch& mismatch) {
    throw mismatch.at_step(step);  // the backward that found it does not know the step
  }
}

void StepEngine::complete(int64_t step) {
  step_ = step;
  tokens_seen_ += tokens_per_step_;
}

uint64_t StepEngine::params_checksum() const { return target_.parallel->params_checksum(); }

uint64_t StepEngine::gradients_checksum() const { return target_.parallel->gradients_checksum(); }

}  // namespace titan
