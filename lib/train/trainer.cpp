#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ostream>

#include "distributed/process_group.h"
#include "instruments/layer_norms.h"
#include "instruments/validation.h"
#include "train/rank_agreement.h"
#include "train/run_log.h"
#include "util/error.h"
#include "util/hash.h"

namespace titan {

Trainer::Trainer(RunComponents& run, RunOutputs& outputs)
    : ctx_(run.context), config_(run.context.config), run_(run), outputs_(outputs) {
  engine().set_schedule_origin(run_.start.schedule_origin);
  if (run_.start.state) {
    engine().apply(*run_.start.state);
    for (const auto& instrument : run_.instruments) {
      const auto& saved = run_.start.state->instruments;
      auto it = saved.find(instrument->name());
      if (it != saved.end()) instrument->restore_checkpoint_state(it->second);
    }
  } else {
    // A model-only checkpoint: the data and generators start afresh.
    TrainState fresh = engine().state();
    fresh.step = run_.start.step;
    engine().apply(fresh);
  }
}

void Trainer::adopt_train_timeout() {
  if (train_timeout_adopted_) return;
  train_timeout_adopted_ = true;
  ctx_.process_group->set_timeout(std::chrono::seconds(config_.comm.train_timeout_seconds));
}

StepOutcome Trainer::train_step() {
  StepEngine& engine = this->engine();
  const int64_t step = engine.step() + 1;
  const std::vector<Batch> batches = engine.next_batches();
  StepContext context{step, batches, engine, outputs_.console()};
  std::vector<Instrument*> active;
  std::vector<StepObserver*> observers;
  for (const auto& instrument : run_.instruments) {
    if (!instrument->wants_step(step)) continue;
    active.push_back(instrument.get());
    observers.push_back(instrument.get());
  }
  for (Instrument* instrument : active) instrument->before_step(context);
  const bool max_loss = logs_step(step) && ctx_.process_group->size() > 1;
  StepOutcome outcome = engine.execute(step, batches, observers, StepMode::kTrain, max_loss);
  engine.complete(step);
  for (Instrument* instrument : active) instrument->after_step(context, outcome);
  if (const LayerNormsFound* norms = outcome.findings.find<LayerNormsFound>())
    outputs_.write_histograms(step, norms->histograms);
  check_finite(outcome);
  write_fingerprint(outcome);
  return outcome;
}

void Trainer::check_finite(const StepOutcome& outcome) const {
  if (std::isfinite(outcome.loss) || outcome.skipped) return;
  const char* what = std::isnan(outcome.loss) ? "nan" : outcome.loss > 0 ? "inf" : "-inf";
  throw RuntimeFailure(fmt::format("loss is {} at step {}", what, outcome.step),
                       "lower optimizer.lr, raise lr_scheduler.warmup_steps, or check the data");
}

void Trainer::write_fingerprint(const StepOutcome& outcome) {
  const int64_t step = outcome.step;
  std::optional<uint64_t> checksum;
  if (step % config_.debug.fingerprint_freq == 0) {
    ScopedSeconds timed(checksums_.seconds);
    ++checksums_.count;
    checksum = engine().params_checksum();
    check_replicas_agree(*ctx_.process_group, *checksum, step);
  }
  outputs_.write_fingerprint(step, outcome.loss, outcome.grad_norm, outcome.lr,
                             engine().tokens_seen(), checksum);
}

void Trainer::log_step(const StepOutcome& r, double seconds, int64_t steps) {
  StepMetrics m;
  m.step = r.step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.lr = r.lr;
  m.max_loss = r.max_loss;
  if (const LayerNormsFound* norms = r.findings.find<LayerNormsFound>()) m.layers = norms->parts;
  if (r.tokens_per_expert.defined()) {
    const auto loads = engine().target().model->expert_loads();
    for (size_t i = 0; i < loads.size(); ++i) {
      const at::Tensor counts = r.tokens_per_expert[static_cast<int64_t>(i)].to(at::kDouble);
      m.moe.push_back({loads[i].name, counts.max().item<double>(), counts.mean().item<double>()});
    }
  }
  m.tokens_seen = engine().tokens_seen();
  auto memory = read_and_reset_peak_memory(ctx_.device);
  m.memory_gib = memory.peak_gib;
  m.memory_pct = memory.pct;
  // Per rank, as torchtitan's tps (and so MFU against one process's peak).
  m.tps = static_cast<double>(steps * run_.plan.tokens_per_step) / seconds /
          static_cast<double>(ctx_.process_group->size());
  m.tflops = run_.model.token_flops * m.tps / 1e12;
  m.mfu_pct = ctx_.peak_flops > 0 ? 100.0 * run_.model.token_flops * m.tps / ctx_.peak_flops : 0.0;
  m.step_time_s = seconds / static_cast<double>(steps);
  const CpuUsage now = cpu_usage();
  m.cpu_user_s = (now.user_s - cpu_at_last_log_.user_s) / static_cast<double>(steps);
  m.cpu_system_s = (now.system_s - cpu_at_last_log_.system_s) / static_cast<double>(steps);
  m.minor_faults = (now.minor_faults - cpu_at_last_log_.minor_faults) / static_cast<double>(steps);
  cpu_at_last_log_ = now;
  outputs_.log_step(m);
}

bool Trainer::logs_step(int64_t step) const {
  return step == 1 || step % config_.metrics.log_freq == 0 || step == config_.training.steps;
}

TrainState Trainer::checkpoint_state() const {
  TrainState state = run_.engine->state();
  for (const auto& instrument : run_.instruments) {
    std::string bytes = instrument->checkpoint_state();
    if (!bytes.empty()) state.instruments[instrument->name()] = std::move(bytes);
  }
  return state;
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  std::ostream& log = outputs_.console();
  if (engine().step() == 0 && ctx_.device.is_cpu()) {
    // Baseline for activation memory (peak RSS minus this), used by scripts/bench_ac.sh.
    log << fmt::format("[titan] rss before the first step: {:.3f} GiB (peak so far {:.3f} GiB)\n",
                       current_rss_bytes() / (1 << 30), peak_rss_bytes() / (1 << 30));
  }
  if (config_.checkpoint.create_seed_checkpoint) {
    run_.checkpointer->save_seed(checkpoint_state(), log);
    log << "[titan] created the seed checkpoint (checkpoint.create_seed_checkpoint); no step "
           "trained\n";
    log.flush();
    return summary;
  }
  const auto start = SteadyClock::now();
  const CpuUsage usage_start = cpu_usage();
  cpu_at_last_log_ = usage_start;
  const int64_t first_step = engine().step();
  auto last_log = start;
  int64_t steps_since_log = 0;
  while (engine().step() < config_.training.steps) {
    if (run_.checkpointer->stop_requested(
            engine().step(), [this] { return checkpoint_state(); }, log))
      break;
    const StepOutcome r = train_step();
    adopt_train_timeout();
    summary.losses.push_back(r.loss);
    ++steps_since_log;
    if (logs_step(r.step)) {
      log_step(r, seconds_since(last_log), steps_since_log);
      last_log = SteadyClock::now();
      steps_since_log = 0;
    }
    if (const Validated* validated = r.findings.find<Validated>())
      outputs_.log_validation(r.step, *validated);
    if (run_.checkpointer->due(r.step)) {
      run_.checkpointer->save(checkpoint_state(), r.step == config_.training.steps, log);
    }
  }
  // No rank leaves while another may still need it (rank 0 serves the store).
  if (ctx_.process_group->size() > 1) ctx_.process_group->any_rank(false, "the end-of-run barrier");
  summary.steps = static_cast<int64_t>(summary.losses.size());
  summary.seconds = seconds_since(start);
  summary.mean_tps =
      static_cast<double>((engine().step() - first_step) * run_.plan.tokens_per_step) /
      summary.seconds;
  const CpuUsage end = cpu_usage();
  summary.cpu_user_s = end.user_s - usage_start.user_s;
  summary.cpu_system_s = end.system_s - usage_start.system_s;
  summary.minor_faults = end.minor_faults - usage_start.minor_faults;
  log_run_end(run_, summary, outputs_.cost_lines(summary.seconds), checksums_, log);
  return summary;
}

}  // namespace titan
