#include "instruments/rerun_check.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "instruments/layer_norms.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/stopwatch.h"
#include "util/strings.h"

namespace titan {
namespace {

double bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<double>(t.nbytes()) : 0; }

double snapshot_bytes(const Snapshot& s) {
  double bytes = 0;
  for (const auto& t : s.module_tensors) bytes += bytes_of(t);
  for (const auto& p : s.optimizer) {
    if (p) bytes += bytes_of(p->exp_avg) + bytes_of(p->exp_avg_sq) + bytes_of(p->max_exp_avg_sq);
  }
  return bytes;
}

}  // namespace

RerunCheck::RerunCheck(const Config& config, const RunFolder& folder,
                       std::shared_ptr<NumericsTracer> tracer, std::string dataset, int64_t rank)
    : config_(config),
      folder_(folder),
      tracer_(std::move(tracer)),
      monitor_(config.debug),
      dataset_(std::move(dataset)),
      rank_(rank),
      layer_window_(config.debug.rerun_window + 1) {}

std::string RerunCheck::describe() const {
  const DebugConfig& dbg = config_.debug;
  const bool spikes = dbg.rerun_on == RerunOn::kSpike || dbg.rerun_on == RerunOn::kBoth;
  return fmt::format("rerun check: on {}{}, steps [{}], action {}; reports in {}",
                     to_string(dbg.rerun_on),
                     spikes ? fmt::format(" (spike: loss > {} x mean of the last {})",
                                          dbg.rerun_spike_factor, dbg.rerun_window)
                            : "",
                     join_integers(dbg.rerun_steps, ", "), to_string(dbg.rerun_action),
                     folder_.subfolder(RunSubfolder::kRerun));
}

void RerunCheck::open_outputs(int64_t) { folder_.make(RunSubfolder::kRerun); }

void RerunCheck::before_step(StepContext& context) {
  before_.reset();
  if (!monitor_.keeps_state_before(context.step)) return;
  ScopedSeconds timed(keep_cost_.seconds);
  before_ = context.engine.snapshot();
  kept_bytes_ = snapshot_bytes(*before_);
  ++keep_cost_.count;
}

std::string RerunCheck::cost_line(const RunTotals& totals) const {
  if (totals.steps == 0) return "";
  return fmt::format(
      "rerun check: state kept before {} steps ({:.1f} MiB in memory: parameters, optimizer "
      "state, TrainState; the batch besides), {:.2f} ms per step, {:.2f}% of the mean step "
      "time; {} reruns",
      keep_cost_.count, kept_bytes_ / (1 << 20), 1e3 * keep_cost_.per_count(),
      totals.step_seconds() > 0 ? 100.0 * keep_cost_.per_count() / totals.step_seconds() : 0.0,
      reruns_);
}

std::string RerunCheck::write_report(const RerunReport& report) const {
  folder_.make(RunSubfolder::kRerun);
  const std::string path =
      folder_.report(RunSubfolder::kRerun, fmt::format("step{}.txt", report.step), rank_);
  write_file_atomically(path, format_rerun_report(report));
  return path;
}

StepExecution RerunCheck::describe_execution(const std::string& label, const StepOutcome& outcome,
                                             const StepEngine& engine) const {
  StepExecution x;
  x.label = label;
  x.loss = outcome.loss;
  x.grad_norm = outcome.grad_norm;
  x.gradients = engine.gradients_checksum();  // still in .grad: the update does not touch them
  if (const NumericsStep* traced = outcome.findings.find<NumericsStep>()) x.trace = *traced;
  return x;
}

StepOutcome RerunCheck::execute_traced(StepContext& context) {
  context.engine.restore(*before_);
  tracer_->trace_next_execution();
  return context.engine.execute(context.step, context.batches, {tracer_.get()});
}

std::vector<SequenceLoss> RerunCheck::sequence_losses(StepContext& context) {
  context.engine.restore(*before_);
  const StepOutcome losses =
      context.engine.execute(context.step, context.batches, {}, StepMode::kLosses);
  std::vector<SequenceLoss> out;
  for (size_t m = 0; m < losses.sequence_losses.size(); ++m) {
    const at::Tensor& per_sequence = losses.sequence_losses[m];  // (B)
    const Batch& batch = context.batches[m];
    for (int64_t i = 0; i < per_sequence.size(0); ++i) {
      SequenceLoss s;
      s.micro_batch = static_cast<int64_t>(m);
      s.sequence = i;
      s.loss = per_sequence[i].item<double>();
      if (static_cast<size_t>(i) < batch.sources.size()) s.sources = batch.sources[i];
      out.push_back(std::move(s));
    }
  }
  return out;
}

void RerunCheck::after_step(StepContext& context, StepOutcome& outcome) {
  if (const LayerNormsFound* norms = outcome.findings.find<LayerNormsFound>())
    layer_window_.add(context.step, norms->parts);
  std::optional<RerunTrigger> trigger;
  if (before_) trigger = monitor_.trigger(context.step, outcome.loss, outcome.grad_norm);
  if (!trigger) {
    monitor_.accept(outcome.loss);
    before_.reset();
    return;
  }
  outcome = rerun(*trigger, context, outcome);
  before_.reset();
}

StepOutcome RerunCheck::rerun(RerunTrigger trigger, StepContext& context,
                              const StepOutcome& original) {
  StepEngine& engine = context.engine;
  const int64_t step = context.step;
  ++reruns_;
  RerunReport report;
  report.step = step;
  report.trigger = trigger;
  report.trigger_text = monitor_.describe(trigger, original.loss, original.grad_norm);
  report.deterministic = config_.debug.deterministic;
  report.dataset = dataset_;
  report.layer_window = layer_window_.steps();
  report.executions.push_back(describe_execution("original", original, engine));
  const Snapshot after = engine.snapshot();  // the original's result, for "stop"

  report.sequences = sequence_losses(context);
  if (!original.findings
           .find<NumericsStep>()) {  // untraced: execute it again, traced, to compare op by op
    const StepOutcome again = execute_traced(context);
    report.executions.push_back(describe_execution("original re-executed (traced)", again, engine));
  }
  const StepOutcome rerun = execute_traced(context);
  report.executions.push_back(describe_execution("rerun", rerun, engine));
  analyse_rerun(report);

  const bool non_finite = trigger == RerunTrigger::kNonFinite;
  StepOutcome result = original;
  switch (config_.debug.rerun_action) {
    case RerunAction::kStop:
      report.action = non_finite ? "stop: training ends (exit 1)"
                                 : "stop: the original's result is kept and training goes on";
      if (!non_finite) engine.restore(after);
      break;
    case RerunAction::kSkip:
      report.action = "skip: the step's update is dropped; training goes on with the next batch";
      engine.restore(*before_);
      result.skipped = true;
      break;
    case RerunAction::kContinue:
      report.action = "continue: the rerun's result is kept";
      result.loss = rerun.loss;
      result.grad_norm = rerun.grad_norm;
      result.lr = rerun.lr;
      break;
  }
  // The data, the step and the tokens go on after the step whatever the action; the generators
  // stay as the action left them.
  TrainState progress = engine.state();
  progress.step = after.state.step;
  progress.tokens_seen = after.state.tokens_seen;
  progress.loader = after.state.loader;
  engine.apply(progress);
  if (!result.skipped) monitor_.accept(result.loss);

  const std::string path = write_report(report);
  context.console << fmt::format("[titan] rerun check: step {} ({}): {}; report {}\n", step,
                                 to_string(trigger), to_string(report.outcome), path);
  context.console << format_rerun_report(report);
  context.console.flush();
  if (config_.debug.rerun_action == RerunAction::kStop && non_finite) {
    throw RuntimeFailure(
        fmt::format("step {}: {}; the rerun found it {}{}", step, report.trigger_text,
                    to_string(report.outcome),
                    report.first_non_finite
                        ? "; first non-finite output: " + describe_entry(*report.first_non_finite)
                        : ""),
        fmt::format("read {}; debug.rerun_action = \"skip\" drops such steps", path));
  }
  return result;
}

}  // namespace titan
