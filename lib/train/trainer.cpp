#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ostream>

#include "determinism/determinism.h"
#include "distributed/process_group.h"
#include "train/rank_agreement.h"
#include "util/autocast.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/stopwatch.h"

namespace titan {
Trainer::Trainer(RunParts& parts, RunOutputs& outputs)
    : ctx_(parts.context),
      config_(parts.context.config),
      parts_(parts),
      outputs_(outputs),
      step_options_(parts.step_options),
      layer_norms_(parts.model) {
  if (parts_.start.state) {
    apply(*parts_.start.state);
  } else {
    step_ = parts_.start.step;  // a model-only checkpoint: the data and generators start afresh
  }
}

Trainer::~Trainer() = default;

void Trainer::adopt_train_timeout() {
  if (train_timeout_adopted_) return;
  train_timeout_adopted_ = true;
  ctx_.process_group->set_timeout(std::chrono::seconds(config_.comm.train_timeout_seconds));
}

ExecutedStep Trainer::execute_step(int64_t step, const std::vector<Batch>& batches,
                                   bool capture_ops, bool write_log) {
  const double lr = config_.optimizer.lr * parts_.schedule.factor(step);
  // The first execution of a step is the one the logs describe.
  const bool measure = write_log && (logs_step(step) || parts_.rerun || histograms_at(step));
  const bool max_loss = write_log && logs_step(step) && ctx_.process_group->size() > 1;
  step_options_.before_clip = nullptr;
  step_options_.reduce_gradients = nullptr;
  step_options_.step = step;
  if (parts_.reducer) {
    step_options_.reduce_gradients = [this, step, max_loss](at::Tensor& loss_sum) {
      // Each rank's own loss (its summed loss is over the tokens of all ranks).
      at::Tensor per_rank;
      if (max_loss) {
        const auto world = ctx_.process_group->size();
        per_rank = at::zeros({world}, at::kDouble);
        per_rank[ctx_.process_group->rank()] = loss_sum.cpu() * static_cast<double>(world);
      }
      parts_.reducer->reduce(loss_sum, step);
      if (max_loss) {
        ctx_.process_group->all_reduce_sum(per_rank, "the ranks' losses");
        last_max_loss_ = per_rank.max().item<double>();
      }
    };
  }
  std::vector<std::function<void()>> before_clip;
  if (parts_.numerics) {
    parts_.numerics->begin_step(step, capture_ops, write_log);
    if (parts_.numerics->tracing())
      before_clip.emplace_back([this] { parts_.numerics->record_gradients(); });
  }
  if (measure) {
    layer_norms_.begin(histograms_at(step));
    before_clip.emplace_back([this] { layer_norms_.record_gradients(); });
  }
  if (!before_clip.empty()) {
    step_options_.before_clip = [before_clip] {
      for (const auto& f : before_clip) f();
    };
  }
  ExecutedStep e;
  try {
    e.result = fail_on_nondeterministic_op(step, [&] {
      return run_step(parts_.model, *parts_.optimizer, parts_.params, batches, lr, step_options_);
    });
  } catch (const ac::RecomputeMismatch& mismatch) {
    throw mismatch.at_step(step);  // the backward that found it does not know the step
  }
  e.result.step = step;
  if (measure) e.layers = layer_norms_.end();
  if (parts_.numerics) {
    std::optional<NumericsStep> record = parts_.numerics->end_step();
    if (capture_ops) e.trace = std::move(record);
  }
  return e;
}

ExecutedStep Trainer::execute_traced(int64_t step, const std::vector<Batch>& batches) {
  return execute_step(step, batches, true, false);
}

StepResult Trainer::train_step() {
  const int64_t step = step_ + 1;
  std::optional<Snapshot> before;
  if (parts_.rerun && parts_.rerun->keeps_state_before(step))
    before = parts_.rerun->keep_state(*this);
  std::vector<Batch> micro_batches = draw_micro_batches();
  std::optional<PrecisionProbe::KeptState> precision_before;
  if (parts_.precision && parts_.precision->probes(step))
    precision_before = parts_.precision->keep_state(parts_.model);
  // A step listed in rerun_steps is traced the first time too, so a difference can be named.
  const bool trace_original = parts_.rerun && parts_.rerun->traces_original(step);
  ExecutedStep original = execute_step(step, micro_batches, trace_original, true);
  last_layers_ = original.layers;
  if (histograms_at(step)) outputs_.write_histograms(step, layer_norms_.histograms());
  step_ = step;
  tokens_seen_ += parts_.plan.tokens_per_step;
  if (precision_before) {
    parts_.precision->measure(step, *precision_before, micro_batches, original.result,
                              outputs_.console());
  }
  StepResult result = original.result;
  if (parts_.rerun) {
    result = parts_.rerun->check(step, before, micro_batches, original, *this, outputs_.console());
  }
  if (!std::isfinite(result.loss) && !result.skipped) {
    const char* what = std::isnan(result.loss) ? "nan" : result.loss > 0 ? "inf" : "-inf";
    throw RuntimeFailure(fmt::format("loss is {} at step {}", what, step),
                         "lower optimizer.lr, raise lr_scheduler.warmup_steps, or check the data");
  }
  std::optional<uint64_t> checksum;
  if (step % config_.debug.fingerprint_freq == 0) {
    const auto start = SteadyClock::now();
    checksum = tensors_checksum(parts_.params);
    check_replicas_agree(*ctx_.process_group, *checksum, step);
    checksum_seconds_ += seconds_since(start);
  }
  outputs_.write_fingerprint(step, result.loss, result.grad_norm, result.lr, tokens_seen_,
                             checksum);
  return result;
}

std::vector<Batch> Trainer::draw_micro_batches() {
  const int64_t count = parts_.plan.micro_batches;
  std::vector<Batch> mine;
  if (!config_.debug.batch_invariant) {
    for (int64_t i = 0; i < count; ++i) mine.push_back(parts_.loader->next());
    return mine;
  }
  // The step's global batch is the next world x count batches of the one global sequence; rank
  // r's part is the r-th run of `count` of them, so its sequences are contiguous.
  const int64_t rank = ctx_.process_group->rank(), world = ctx_.process_group->size();
  for (int64_t i = 0; i < world * count; ++i) {
    Batch batch = parts_.loader->next();
    if (i / count == rank) mine.push_back(std::move(batch));
  }
  return mine;
}

TrainState Trainer::state() const {
  TrainState s;
  s.step = step_;
  s.tokens_seen = tokens_seen_;
  s.loader = parts_.loader->state();
  s.rng = capture_rng_state();
  return s;
}

void Trainer::apply(const TrainState& s) {
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  parts_.loader->load_state(s.loader);
  restore_rng_state(s.rng);
}

Snapshot Trainer::snapshot() const {
  return take_snapshot(*parts_.model, *parts_.optimizer, state());
}

void Trainer::restore(const Snapshot& snapshot) {
  restore_snapshot(snapshot, *parts_.model, *parts_.optimizer);
  apply(snapshot.state);
}

uint64_t Trainer::gradients_checksum() const {
  std::vector<at::Tensor> grads;
  for (const auto& p : parts_.params)
    grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return tensors_checksum(grads);
}

std::vector<SequenceLoss> Trainer::sequence_losses(const std::vector<Batch>& batches) {
  at::NoGradGuard no_grad;
  parts_.model->eval();  // without dropout: the batch's own difficulty
  std::vector<SequenceLoss> out;
  for (size_t m = 0; m < batches.size(); ++m) {
    const Batch& b = batches[m];
    at::Tensor logits;
    {
      AutocastScope autocast(ctx_.device.type(), step_options_.autocast_bf16, at::kBFloat16);
      logits = parts_.model->forward(b.inputs.to(ctx_.device));  // (B, T, V)
    }
    auto labels = b.labels.to(ctx_.device);
    auto per_token = at::cross_entropy_loss(logits.flatten(0, 1).to(at::kFloat),
                                            labels.flatten(0, 1), {}, at::Reduction::None);
    auto per_sequence = per_token.view(labels.sizes()).to(at::kDouble).mean(1).cpu();  // (B)
    for (int64_t i = 0; i < per_sequence.size(0); ++i) {
      SequenceLoss s;
      s.micro_batch = static_cast<int64_t>(m);
      s.sequence = i;
      s.loss = per_sequence[i].item<double>();
      if (static_cast<size_t>(i) < b.sources.size()) s.sources = b.sources[i];
      out.push_back(std::move(s));
    }
  }
  parts_.model->train();
  return out;
}

void Trainer::log_step(const StepResult& r, double seconds, int64_t steps) {
  StepMetrics m;
  m.step = r.step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.lr = r.lr;
  m.max_loss = ctx_.process_group->size() > 1 ? last_max_loss_ : r.loss;
  m.layers = last_layers_;
  m.tokens_seen = tokens_seen_;
  auto memory = read_and_reset_peak_memory(ctx_.device);
  m.memory_gib = memory.peak_gib;
  m.memory_pct = memory.pct;
  // Per rank, as torchtitan's tps (and so MFU against one process's peak).
  m.tps = static_cast<double>(steps * parts_.plan.tokens_per_step) / seconds /
          static_cast<double>(ctx_.process_group->size());
  m.tflops = parts_.token_flops * m.tps / 1e12;
  m.mfu_pct = ctx_.peak_flops > 0 ? 100.0 * parts_.token_flops * m.tps / ctx_.peak_flops : 0.0;
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

bool Trainer::histograms_at(int64_t step) const {
  const int64_t every = config_.metrics.histogram_freq;
  return outputs_.tensorboard_on() && every > 0 && step % every == 0;
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  std::ostream& log = outputs_.console();
  if (step_ == 0 && ctx_.device.is_cpu()) {
    // Baseline for activation memory (peak RSS minus this), used by scripts/bench_ac.sh.
    log << fmt::format("[titan] rss before the first step: {:.3f} GiB\n",
                       current_rss_bytes() / (1 << 30));
  }
  const auto start = SteadyClock::now();
  const CpuUsage usage_start = cpu_usage();
  cpu_at_last_log_ = usage_start;
  const int64_t first_step = step_;
  auto last_log = start;
  int64_t steps_since_log = 0;
  while (step_ < config_.training.steps) {
    if (parts_.checkpointer->stop_requested(
            step_, [this] { return state(); }, log))
      break;
    StepResult r = train_step();
    adopt_train_timeout();
    summary.losses.push_back(r.loss);
    ++steps_since_log;
    if (logs_step(r.step)) {
      log_step(r, seconds_since(last_log), steps_since_log);
      last_log = SteadyClock::now();
      steps_since_log = 0;
    }
    if (parts_.checkpointer->due(r.step)) {
      parts_.checkpointer->save(state(), r.step == config_.training.steps, log);
    }
  }
  // No rank leaves while another may still need it (rank 0 serves the store).
  if (ctx_.process_group->size() > 1) ctx_.process_group->any_rank(false, "the end-of-run barrier");
  summary.steps = static_cast<int64_t>(summary.losses.size());
  summary.seconds = seconds_since(start);
  summary.mean_tps =
      static_cast<double>((step_ - first_step) * parts_.plan.tokens_per_step) / summary.seconds;
  summary.checksum_seconds = checksum_seconds_;
  summary.layer_norm_seconds = layer_norms_.seconds();
  summary.layer_norm_steps = layer_norms_.steps();
  summary.tensorboard_seconds = outputs_.tensorboard_seconds();
  summary.tensorboard_writes = outputs_.tensorboard_writes();
  summary.reruns = parts_.rerun ? parts_.rerun->reruns() : 0;
  const CpuUsage end = cpu_usage();
  summary.cpu_user_s = end.user_s - usage_start.user_s;
  summary.cpu_system_s = end.system_s - usage_start.system_s;
  summary.minor_faults = end.minor_faults - usage_start.minor_faults;
  log_run_end(parts_, summary, log);
  return summary;
}

}  // namespace titan
