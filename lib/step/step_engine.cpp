#include "step/step_engine.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <stdexcept>

#include "ac/recompute.h"
#include "determinism/determinism.h"
#include "determinism/rng_state.h"
#include "util/error.h"
#include "util/hash.h"

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
  for (const ExpertLoad& load : target_.model->expert_loads()) {
    if (load.expert_bias.defined())
      s.model_buffers[load.name + ".expert_bias"] = load.expert_bias.detach().cpu().clone();
  }
  return s;
}

void StepEngine::apply(const TrainState& s) {
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  batches_.load_state(s.loader);
  restore_rng_state(s.rng);
  torch::NoGradGuard no_grad;
  for (const ExpertLoad& load : target_.model->expert_loads()) {
    if (!load.expert_bias.defined()) continue;
    const std::string name = load.name + ".expert_bias";
    auto it = s.model_buffers.find(name);
    if (it == s.model_buffers.end() || it->second.sizes() != load.expert_bias.sizes()) {
      throw RuntimeFailure(
          fmt::format("the train state has no {} of {} experts", name, load.expert_bias.numel()),
          "the checkpoint was saved for another model: resume with the config that saved it");
    }
    load.expert_bias.copy_(it->second);
  }
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

uint64_t StepEngine::params_checksum() const {
  const uint64_t params = target_.parallel->params_checksum();
  std::vector<at::Tensor> biases;
  for (const ExpertLoad& load : target_.model->expert_loads()) {
    if (load.expert_bias.defined()) biases.push_back(load.expert_bias);
  }
  // The expert biases steer the routing as much as any parameter (none in a dense model).
  return biases.empty() ? params : hash_combine(params, tensors_checksum(biases));
}

uint64_t StepEngine::gradients_checksum() const { return target_.parallel->gradients_checksum(); }

}  // namespace titan
