#include "train/trainer.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <ostream>

#include "ac/apply.h"
#include "config/loader.h"
#include "determinism/determinism.h"
#include "distributed/process_group.h"
#include "metrics/device_stats.h"
#include "train/memory_check.h"
#include "util/autocast.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/malloc_tuning.h"
#include "util/omp_env.h"
#include "util/strings.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ModelArgs model_args_for(const Config& config) {
  ModelArgs args = model_args_for_flavor(config.model.flavor);
  args.max_seq_len = config.training.seq_len;
  args.dropout = config.model.dropout;
  return args;
}

bool uses_bf16_autocast(const c10::Device& device, MixedPrecision precision) {
  switch (precision) {
    case MixedPrecision::kBfloat16:
      return device.is_cuda();  // CPU always trains in float32
    case MixedPrecision::kFloat32:
      return false;
  }
  return false;
}

}  // namespace

Trainer::Trainer(const RunContext& context)
    : ctx_(context),
      config_(context.config),
      args_(model_args_for(context.config)),
      plan_(batch_plan(context.config.training, context.process_group->size())),
      schedule_(context.config.lr_scheduler, context.config.training.steps) {
  const auto& t = config_.training;
  check_memory(args_, config_, plan_.micro_batches, ctx_.device);
  source_ = make_token_source(t, ctx_.determinism.seed, t.seq_len + 1, args_.vocab_size);
  loader_ = std::make_unique<DataLoader>(source_, t.local_batch_size, t.seq_len,
                                         ctx_.process_group->rank(), ctx_.process_group->size());
  model_ = Transformer(args_);
  model_->to(ctx_.device);
  model_->init_weights();
  model_->train();
  kernels_ = model_kernels(args_, ctx_.device);
  const bool reruns = RerunCheck::armed(config_.debug);
  if (reruns) {
    rerun_ = std::make_unique<RerunCheck>(config_, source_->describe(), ctx_.process_group->rank());
  }
  numerics_ = make_numerics_tracer(config_.debug.numerics_trace, config_.debug.numerics_freq,
                                   model_, reruns);
  checkpointed_blocks_ = ac::apply_activation_checkpointing(
      model_, config_.activation_checkpoint, config_.job.dump_folder + "/ac_debug", numerics_);
  params_ = model_->parameters();
  optimizer_ = build_optimizer(params_, config_.optimizer);
  step_options_.device = ctx_.device;
  step_options_.autocast_bf16 = uses_bf16_autocast(ctx_.device, t.mixed_precision_param);
  step_options_.max_norm = t.max_norm;
  flops_per_token_ = flops_per_token(args_, t.seq_len);
  ProcessGroup& group = *ctx_.process_group;
  step_options_.data_parallel = group.size();
  if (group.size() > 1) reducer_ = std::make_unique<GradientReducer>(group, params_);
  checkpointer_ = std::make_unique<Checkpointer>(config_, group, model_, *optimizer_);
  StartPoint start = checkpointer_->resume_or_initialize();
  if (start.state) {
    apply(*start.state);
  } else {
    step_ = start.step;  // a model-only checkpoint: the data and generators start afresh
  }
  start_step_ = start.step;
  start_notes_ = std::move(start.notes);
  check_replicas_agree();
}

FingerprintHeader Trainer::fingerprint_header() const {
  const c10::Device& device = ctx_.device;
  return FingerprintHeader{device.is_cuda() ? "cuda" : "cpu",
                           hardware_name(device),
                           config_hash(config_),
                           ctx_.determinism,
                           to_string(kernels_.attention),
                           to_string(kernels_.swiglu),
                           to_string(kernels_.rms_norm),
                           to_string(adamw_kernel_for(device))};
}

void Trainer::check_replicas_agree() {
  ProcessGroup& group = *ctx_.process_group;
  initial_checksum_ = tensors_checksum(params_);
  if (group.size() == 1) return;
  const auto checksums =
      group.gather("initial_parameters", fmt::format("{:#018x}", initial_checksum_));
  std::vector<std::string> differing;
  for (size_t r = 1; r < checksums.size(); ++r) {
    if (checksums[r] != checksums[0]) {
      differing.push_back(fmt::format("rank {} has {}", r, checksums[r]));
    }
  }
  const std::string verdict = group.broadcast(
      "initial_parameters_verdict",
      differing.empty()
          ? ""
          : fmt::format("rank 0 has {}, {}", checksums[0], fmt::join(differing, ", ")));
  if (!verdict.empty()) {
    throw RuntimeFailure(
        fmt::format("the ranks start from different parameters (checksums: {})", verdict),
        "start every rank with the same config (model, debug.seed) and the same checkpoint or "
        "initial_load_path");
  }
}

void Trainer::adopt_train_timeout() {
  if (train_timeout_adopted_) return;
  train_timeout_adopted_ = true;
  ctx_.process_group->set_timeout(std::chrono::seconds(config_.comm.train_timeout_seconds));
}

Trainer::~Trainer() = default;

void Trainer::start(RunOutputs& outputs) {
  outputs_ = &outputs;
  log_start(outputs.console());
}

void Trainer::log_start(std::ostream& log) const {
  const auto& t = config_.training;
  const auto& d = ctx_.determinism;
  log << fmt::format("[titan] titan-train {} on libtorch {}\n", TITAN_VERSION, TORCH_VERSION);
  log << fmt::format("[titan] model {} {}: {} parameters ({} non-embedding)\n", config_.model.name,
                     to_string(config_.model.flavor), with_thousands(args_.num_params()),
                     with_thousands(args_.num_params() - args_.num_embedding_params()));
  log << fmt::format(
      "[titan] kernels: attention {} (head_dim {}), SwiGLU {}, RMSNorm {}, AdamW {}\n",
      to_string(kernels_.attention), args_.head_dim(), to_string(kernels_.swiglu),
      to_string(kernels_.rms_norm), to_string(adamw_kernel_for(ctx_.device)));
  log << fmt::format("[titan] device {}, {} CPU threads, {}, seed {}{}\n", device_name(ctx_.device),
                     d.cpu_threads, step_options_.autocast_bf16 ? "bf16 autocast" : "float32",
                     d.seed, d.seed_was_drawn ? " (drawn: set debug.seed to repeat)" : "");
  for (const auto& warning : config_warnings(config_))
    log << "[titan] warning: " << warning << "\n";
  log << format_determinism_block(
      d, fmt::format("{} {}", ctx_.device.str(), hardware_name(ctx_.device)));
  if (!malloc_tuning_summary().empty()) log << "[titan] " << malloc_tuning_summary() << "\n";
  if (!ctx_.device.is_cuda()) log << "[titan] " << idle_threads_summary() << "\n";
  log << fmt::format("[titan] data: {}\n", source_->describe());
  if (reducer_) {
    const auto& p = config_.parallelism;
    log << fmt::format(
        "[titan] data parallel: {} ranks over {} (replicate {}, shard {}: both run as "
        "replication), gradients all-reduced in {} bucket(s); every rank starts from parameters "
        "{:#018x}; timeouts {} s to step 1, {} s after\n",
        ctx_.process_group->size(), ctx_.process_group->backend(), p.data_parallel_replicate_degree,
        p.data_parallel_shard_degree, reducer_->buckets(), initial_checksum_,
        config_.comm.init_timeout_seconds, config_.comm.train_timeout_seconds);
  }
  log << fmt::format(
      "[titan] {} steps x {} tokens (local_batch_size {} x seq_len {} x {} micro-batches{}), "
      "warmup {} steps, peak lr {}\n",
      t.steps, with_thousands(plan_.tokens_per_step), t.local_batch_size, t.seq_len,
      plan_.micro_batches,
      reducer_ ? fmt::format(" x {} ranks", ctx_.process_group->size()) : std::string(),
      schedule_.warmup_steps(), config_.optimizer.lr);
  log << fmt::format("[titan] {:.3g} FLOPs per token, peak {:.1f} GFLOP/s{}; outputs in {}\n",
                     flops_per_token_, ctx_.peak_flops / 1e9,
                     ctx_.device.is_cpu() ? " (measured sgemm)" : "", config_.job.dump_folder);
  const auto& ac = config_.activation_checkpoint;
  if (checkpointed_blocks_.empty()) {
    log << "[titan] activation checkpointing: off\n";
  } else {
    log << fmt::format(
        "[titan] activation checkpointing: mode {}{}, preserve_rng_state {}, "
        "determinism_check {}, debug {}\n",
        to_string(ac.mode), ac.mode == AcMode::kSelective ? " every " + ac.selective_ac_option : "",
        ac.preserve_rng_state, to_string(ac.determinism_check), ac.debug);
    for (const auto& name : checkpointed_blocks_) log << "[titan]   checkpointing " << name << "\n";
  }
  if (numerics_ && numerics_->writes_log()) {
    log << fmt::format("[titan] numerics trace: {} every {} steps into numerics.log\n",
                       to_string(config_.debug.numerics_trace), config_.debug.numerics_freq);
  }
  if (rerun_) {
    const auto& dbg = config_.debug;
    log << fmt::format("[titan] rerun check: on {}{}, steps [{}], action {}; reports in {}/rerun\n",
                       to_string(dbg.rerun_on),
                       dbg.rerun_on == RerunOn::kSpike || dbg.rerun_on == RerunOn::kBoth
                           ? fmt::format(" (spike: loss > {} x mean of the last {})",
                                         dbg.rerun_spike_factor, dbg.rerun_window)
                           : "",
                       join_integers(dbg.rerun_steps, ", "), to_string(dbg.rerun_action),
                       config_.job.dump_folder);
  }
  for (const auto& note : start_notes_) log << "[titan] " << note << "\n";
  log.flush();
}

ExecutedStep Trainer::execute_step(int64_t step, const std::vector<Batch>& batches,
                                   bool capture_ops, bool write_log) {
  const double lr = config_.optimizer.lr * schedule_.factor(step);
  step_options_.before_clip = nullptr;
  step_options_.reduce_gradients = nullptr;
  if (reducer_) {
    step_options_.reduce_gradients = [this, step](at::Tensor& loss_sum) {
      reducer_->reduce(loss_sum, step);
    };
  }
  if (numerics_) {
    numerics_->begin_step(step, capture_ops, write_log);
    if (numerics_->tracing()) step_options_.before_clip = [this] { numerics_->record_gradients(); };
  }
  ExecutedStep e;
  try {
    e.result = fail_on_nondeterministic_op(
        step, [&] { return run_step(model_, *optimizer_, params_, batches, lr, step_options_); });
  } catch (const ac::RecomputeMismatch& mismatch) {
    throw mismatch.at_step(step);  // the backward that found it does not know the step
  }
  e.result.step = step;
  if (numerics_) {
    std::optional<NumericsStep> record = numerics_->end_step();
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
  if (rerun_ && rerun_->keeps_state_before(step)) before = rerun_->keep_state(*this);
  std::vector<Batch> micro_batches;
  for (int64_t i = 0; i < plan_.micro_batches; ++i) micro_batches.push_back(loader_->next());
  // A step listed in rerun_steps is traced the first time too, so a difference can be named.
  const bool trace_original = rerun_ && rerun_->traces_original(step);
  ExecutedStep original = execute_step(step, micro_batches, trace_original, true);
  step_ = step;
  tokens_seen_ += plan_.tokens_per_step;
  StepResult result = original.result;
  if (rerun_) {
    result = rerun_->check(step, before, micro_batches, original, *this, outputs_->console());
  }
  if (!std::isfinite(result.loss) && !result.skipped) {
    const char* what = std::isnan(result.loss) ? "nan" : result.loss > 0 ? "inf" : "-inf";
    throw RuntimeFailure(fmt::format("loss is {} at step {}", what, step),
                         "lower optimizer.lr, raise lr_scheduler.warmup_steps, or check the data");
  }
  std::optional<uint64_t> checksum;
  if (step % config_.debug.fingerprint_freq == 0) {
    const auto start = Clock::now();
    checksum = tensors_checksum(params_);
    checksum_seconds_ += seconds_since(start);
  }
  outputs_->write_fingerprint(step, result.loss, result.grad_norm, result.lr, tokens_seen_,
                              checksum);
  return result;
}

TrainState Trainer::state() const {
  TrainState s;
  s.step = step_;
  s.tokens_seen = tokens_seen_;
  s.loader = loader_->state();
  s.rng = capture_rng_state();
  return s;
}

void Trainer::apply(const TrainState& s) {
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  loader_->load_state(s.loader);
  restore_rng_state(s.rng);
}

Snapshot Trainer::snapshot() const { return take_snapshot(*model_, *optimizer_, state()); }

void Trainer::restore(const Snapshot& snapshot) {
  restore_snapshot(snapshot, *model_, *optimizer_);
  apply(snapshot.state);
}

uint64_t Trainer::gradients_checksum() const {
  std::vector<at::Tensor> grads;
  for (const auto& p : params_) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return tensors_checksum(grads);
}

std::vector<SequenceLoss> Trainer::sequence_losses(const std::vector<Batch>& batches) {
  at::NoGradGuard no_grad;
  model_->eval();  // without dropout: the batch's own difficulty
  std::vector<SequenceLoss> out;
  for (size_t m = 0; m < batches.size(); ++m) {
    const Batch& b = batches[m];
    at::Tensor logits;
    {
      CudaAutocastScope autocast(step_options_.autocast_bf16, at::kBFloat16);
      logits = model_->forward(b.inputs.to(ctx_.device));  // (B, T, V)
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
  model_->train();
  return out;
}

void Trainer::log_step(const StepResult& r, double seconds, int64_t steps) {
  StepMetrics m;
  m.step = r.step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.lr = r.lr;
  m.tokens_seen = tokens_seen_;
  auto memory = read_and_reset_peak_memory(ctx_.device);
  m.memory_gib = memory.peak_gib;
  m.memory_pct = memory.pct;
  // Per rank, as torchtitan's tps (and so MFU against one process's peak).
  m.tps = static_cast<double>(steps * plan_.tokens_per_step) / seconds /
          static_cast<double>(ctx_.process_group->size());
  m.tflops = flops_per_token_ * m.tps / 1e12;
  m.mfu_pct = ctx_.peak_flops > 0 ? 100.0 * flops_per_token_ * m.tps / ctx_.peak_flops : 0.0;
  m.step_time_s = seconds / static_cast<double>(steps);
  const CpuUsage now = cpu_usage();
  m.cpu_user_s = (now.user_s - cpu_at_last_log_.user_s) / static_cast<double>(steps);
  m.cpu_system_s = (now.system_s - cpu_at_last_log_.system_s) / static_cast<double>(steps);
  m.minor_faults = (now.minor_faults - cpu_at_last_log_.minor_faults) / static_cast<double>(steps);
  cpu_at_last_log_ = now;
  outputs_->log_step(m);
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  std::ostream& log = outputs_->console();
  if (step_ == 0 && ctx_.device.is_cpu()) {
    // Baseline for activation memory (peak RSS minus this), used by scripts/bench_ac.sh.
    log << fmt::format("[titan] rss before the first step: {:.3f} GiB\n",
                       current_rss_bytes() / (1 << 30));
  }
  const auto start = Clock::now();
  const CpuUsage usage_start = cpu_usage();
  cpu_at_last_log_ = usage_start;
  const int64_t first_step = step_;
  auto last_log = start;
  int64_t steps_since_log = 0;
  while (step_ < config_.training.steps) {
    if (checkpointer_->stop_requested(
            step_, [this] { return state(); }, log))
      break;
    StepResult r = train_step();
    adopt_train_timeout();
    summary.losses.push_back(r.loss);
    ++steps_since_log;
    if (r.step == 1 || r.step % config_.metrics.log_freq == 0 || r.step == config_.training.steps) {
      log_step(r, seconds_since(last_log), steps_since_log);
      last_log = Clock::now();
      steps_since_log = 0;
    }
    if (checkpointer_->due(r.step)) {
      checkpointer_->save(state(), r.step == config_.training.steps, log);
    }
  }
  // No rank leaves while another may still need it (rank 0 serves the store).
  if (ctx_.process_group->size() > 1) ctx_.process_group->any_rank(false, "the end-of-run barrier");
  summary.steps = static_cast<int64_t>(summary.losses.size());
  summary.seconds = seconds_since(start);
  summary.mean_tps =
      static_cast<double>((step_ - first_step) * plan_.tokens_per_step) / summary.seconds;
  summary.checksum_seconds = checksum_seconds_;
  summary.reruns = rerun_ ? rerun_->reruns() : 0;
  const int64_t ranks = ctx_.process_group->size();
  log << fmt::format(
      "[titan] done: {} steps in {:.1f} s, mean tps {}{}, final loss {:.5f}\n", summary.steps,
      summary.seconds, with_thousands(std::llround(summary.mean_tps / static_cast<double>(ranks))),
      ranks > 1
          ? fmt::format(" per rank ({} in all)", with_thousands(std::llround(summary.mean_tps)))
          : std::string(),
      summary.losses.empty() ? NAN : summary.losses.back());
  if (reducer_ && reducer_->reductions() > 0) {
    const double per_step = reducer_->total_seconds() / static_cast<double>(reducer_->reductions());
    log << fmt::format(
        "[titan] gradient all-reduce: mean {:.1f} ms per step, {:.1f}% of the step time "
        "({:.1f} MiB in {} bucket{}, after the backward; waits for slower ranks included)\n",
        1e3 * per_step, 100.0 * per_step * static_cast<double>(summary.steps) / summary.seconds,
        static_cast<double>(reducer_->bytes()) / (1 << 20), reducer_->buckets(),
        reducer_->buckets() == 1 ? "" : "s");
  }
  log << fmt::format("[titan] fingerprint checksums: {:.1f} ms in all, {:.2f}% of the run\n",
                     1e3 * checksum_seconds_, 100.0 * checksum_seconds_ / summary.seconds);
  if (summary.steps > 0) {
    const CpuUsage end = cpu_usage();
    const double user = end.user_s - usage_start.user_s, sys = end.system_s - usage_start.system_s;
    log << fmt::format(
        "[titan] CPU time in the steps: user {:.1f} s, system {:.1f} s ({:.1f}% in the kernel), "
        "{} minor page faults per step\n",
        user, sys, user + sys > 0 ? 100.0 * sys / (user + sys) : 0.0,
        std::llround((end.minor_faults - usage_start.minor_faults) /
                     static_cast<double>(summary.steps)));
  }
  if (rerun_ && summary.steps > 0) {
    rerun_->log_cost(summary.seconds / static_cast<double>(summary.steps), log);
  }
  log.flush();
  return summary;
}

}  // namespace titan
