#include "reference_steps.h"

#include <algorithm>
#include <cmath>

#include "catch_torch.h"
#include "config/enums.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "step/step.h"

namespace titan::test {

double check_reference_steps(const ReferenceState& ref, Model model, bool batch_invariant,
                             StepTolerances tol) {
  auto params = model->parameters();
  OptimizerConfig opt_config;
  opt_config.lr = ref.number("lr");
  opt_config.beta1 = ref.number("beta1");
  opt_config.beta2 = ref.number("beta2");
  opt_config.eps = ref.number("eps");
  opt_config.weight_decay = ref.number("weight_decay");
  auto optimizer = build_optimizer(params, opt_config);
  LRSchedulerConfig sched_config;
  sched_config.warmup_steps = static_cast<int64_t>(ref.number("warmup_steps"));
  sched_config.decay_ratio = ref.number("decay_ratio");
  sched_config.decay_type = parse_enum<DecayType>(ref.text("decay_type")).value();
  sched_config.min_lr_factor = ref.number("min_lr_factor");
  const auto steps = static_cast<int64_t>(ref.number("steps"));
  LRSchedule schedule(sched_config, steps);
  StepOptions options;
  options.max_norm = ref.number("max_norm");
  options.batch_invariant = batch_invariant;
  std::vector<Batch> batch = {Batch{ref.tensor("inputs"), ref.tensor("targets"), {}}};
  StepTarget target;
  target.model = model;
  target.params = params;
  target.optimizer = optimizer.get();
  const at::Tensor losses = ref.tensor("step_losses"), norms = ref.tensor("step_grad_norms"),
                   lrs = ref.tensor("step_lrs");
  REQUIRE(losses.numel() == steps);
  double worst = 0;
  for (int64_t s = 1; s <= steps; ++s) {
    StepRequest request;
    request.step = s;
    request.batches = &batch;
    request.lr = opt_config.lr * schedule.factor(s);
    const auto r = run_step(target, options, request);
    const double expected = losses[s - 1].item<double>();
    worst = std::max(worst, std::abs(r.loss - expected) / expected);
    INFO("step " << s);
    CHECK(static_cast<float>(r.lr) == lrs[s - 1].item<float>());
    CHECK(r.loss == Approx(expected).epsilon(tol.loss));
    CHECK(r.grad_norm == Approx(norms[s - 1].item<double>()).epsilon(tol.grad_norm));
  }
  return worst;
}

}  // namespace titan::test
