#include "instruments/rerun_check.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/stopwatch.h"

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

StepExecution describe_execution(const std::string& label, const ExecutedStep& e,
                                 const StepReplay& replay) {
  StepExecution x;
  x.label = label;
  x.loss = e.result.loss;
  x.grad_norm = e.result.grad_norm;
  x.gradients = replay.gradients_checksum();  // still in .grad: the update does not touch them
  x.trace = e.trace;
  return x;
}

}  // namespace

RerunCheck::RerunCheck(const Config& config, std::string dataset, int64_t rank)
    : config_(config),
      monitor_(config.debug),
      dataset_(std::move(dataset)),
      rank_(rank),
      layer_window_(config.debug.rerun_window + 1) {}

bool RerunCheck::armed(const DebugConfig& debug) { return RerunMonitor(debug).armed(); }

Snapshot RerunCheck::keep_state(const StepReplay& replay) {
  const auto start = SteadyClock::now();
  Snapshot s = replay.snapshot();
  keep_cost_.seconds += seconds_since(start);
  keep_cost_.bytes = snapshot_bytes(s);
  ++keep_cost_.steps;
  return s;
}

void RerunCheck::log_cost(double step_seconds, std::ostream& console) const {
  const double per_step = keep_cost_.steps ? keep_cost_.seconds / keep_cost_.steps : 0;
  console << fmt::format(
      "[titan] rerun check: state kept before {} steps ({:.1f} MiB in memory: parameters, "
      "optimizer state, TrainState; the batch besides), {:.2f} ms per step, {:.2f}% of the mean "
      "step time; {} reruns\n",
      keep_cost_.steps, keep_cost_.bytes / (1 << 20), 1e3 * per_step,
      100.0 * per_step / step_seconds, reruns_);
}

std::string RerunCheck::write_report(const RerunReport& report) const {
  const std::string folder = config_.job.dump_folder + "/rerun";
  make_output_folder(folder, FolderLink::kRefuse);
  const std::string path =
      fmt::format("{}/{}", folder, rank_file_name(fmt::format("step{}.txt", report.step), rank_));
  write_file_atomically(path, format_rerun_report(report));
  return path;
}

StepResult RerunCheck::check(int64_t step, const std::optional<Snapshot>& before,
                             const std::vector<Batch>& batches, const ExecutedStep& original,
                             StepReplay& replay, std::ostream& console) {
  const StepResult& r = original.result;
  if (!original.layers.empty()) layer_window_.add(step, original.layers);
  std::optional<RerunTrigger> trigger;
  if (before) trigger = monitor_.trigger(step, r.loss, r.grad_norm);
  if (!trigger) {
    monitor_.accept(r.loss);
    return r;
  }
  return rerun(*trigger, step, *before, batches, original, replay, console);
}

StepResult RerunCheck::rerun(RerunTrigger trigger, int64_t step, const Snapshot& before,
                             const std::vector<Batch>& batches, const ExecutedStep& original,
                             StepReplay& replay, std::ostream& console) {
  ++reruns_;
  RerunReport report;
  report.step = step;
  report.trigger = trigger;
  report.trigger_text = monitor_.describe(trigger, original.result.loss, original.result.grad_norm);
  report.deterministic = config_.debug.deterministic;
  report.dataset = dataset_;
  report.layer_window = layer_window_.steps();
  report.executions.push_back(describe_execution("original", original, replay));
  const Snapshot after = replay.snapshot();  // the original's result, for "stop"

  replay.restore(before);
  report.sequences = replay.sequence_losses(batches);
  if (!original.trace) {  // untraced: execute it again, traced, to compare op by op
    replay.restore(before);
    const ExecutedStep again = replay.execute_traced(step, batches);
    report.executions.push_back(describe_execution("original re-executed (traced)", again, replay));
  }
  replay.restore(before);
  const ExecutedStep rerun = replay.execute_traced(step, batches);
  report.executions.push_back(describe_execution("rerun", rerun, replay));
  analyse_rerun(report);

  const bool non_finite = trigger == RerunTrigger::kNonFinite;
  StepResult result = original.result;
  switch (config_.debug.rerun_action) {
    case RerunAction::kStop:
      report.action = non_finite ? "stop: training ends (exit 1)"
                                 : "stop: the original's result is kept and training goes on";
      if (!non_finite) replay.restore(after);
      break;
    case RerunAction::kSkip:
      report.action = "skip: the step's update is dropped; training goes on with the next batch";
      replay.restore(before);
      result.skipped = true;
      break;
    case RerunAction::kContinue:
      report.action = "continue: the rerun's result is kept";
      result = rerun.result;
      break;
  }
  // The data, the step and the tokens go on after the step whatever the action; the generators
  // stay as the action left them.
  TrainState progress = replay.state();
  progress.step = after.state.step;
  progress.tokens_seen = after.state.tokens_seen;
  progress.loader = after.state.loader;
  replay.apply(progress);
  if (!result.skipped) monitor_.accept(result.loss);

  const std::string path = write_report(report);
  console << fmt::format("[titan] rerun check: step {} ({}): {}; report {}\n", step,
                         to_string(trigger), to_string(report.outcome), path);
  console << format_rerun_report(report);
  console.flush();
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
