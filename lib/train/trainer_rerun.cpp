// The Trainer's side of the rerun check (lib/train/rerun.h): keeping the state before a step,
// re-executing the step from it, and what follows (debug.rerun_action).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "train/trainer.h"
#include "util/autocast.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

double bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<double>(t.nbytes()) : 0; }

double snapshot_bytes(const Snapshot& s) {
  double bytes = 0;
  for (const auto& t : s.module_tensors) bytes += bytes_of(t);
  for (const auto& p : s.optimizer) {
    if (p) bytes += bytes_of(p->exp_avg) + bytes_of(p->exp_avg_sq) + bytes_of(p->max_exp_avg_sq);
  }
  return bytes;
}

uint64_t gradients_checksum(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return tensors_checksum(grads);
}

}  // namespace

Snapshot Trainer::keep_state_before_step() {
  const auto start = Clock::now();
  Snapshot s = snapshot();
  keep_cost_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  keep_cost_.bytes = snapshot_bytes(s);
  ++keep_cost_.steps;
  return s;
}

void Trainer::log_rerun_cost(double step_seconds) const {
  const double per_step = keep_cost_.steps ? keep_cost_.seconds / keep_cost_.steps : 0;
  *ctx_.log << fmt::format(
      "[titan] rerun check: state kept before {} steps ({:.1f} MiB in memory: parameters, "
      "optimizer state, TrainState; the batch besides), {:.2f} ms per step, {:.2f}% of the mean "
      "step time; {} reruns\n",
      keep_cost_.steps, keep_cost_.bytes / (1 << 20), 1e3 * per_step,
      100.0 * per_step / step_seconds, reruns_);
}

StepExecution Trainer::describe_execution(const std::string& label, const ExecutedStep& e) const {
  StepExecution x;
  x.label = label;
  x.loss = e.result.loss;
  x.grad_norm = e.result.grad_norm;
  x.gradients = gradients_checksum(params_);  // still in .grad: the update does not touch them
  if (!e.trace.empty()) {
    x.trace = parse_numerics_log(numerics_header("ops", 1) + e.trace, "(rerun trace)").steps.at(0);
  }
  return x;
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

std::string Trainer::write_rerun_report(const RerunReport& report) const {
  const std::string folder = config_.job.dump_folder + "/rerun";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw RuntimeFailure(fmt::format("cannot create {}: {}", folder, ec.message()),
                         "check the permissions and free space of job.dump_folder");
  }
  const std::string path = fmt::format(
      "{}/{}", folder,
      rank_file_name(fmt::format("step{}.txt", report.step), ctx_.process_group->rank()));
  write_file_atomically(path, format_rerun_report(report));
  return path;
}

StepResult Trainer::rerun_step(RerunTrigger trigger, const Snapshot& before,
                               const std::vector<Batch>& batches, const ExecutedStep& original) {
  const int64_t step = step_;
  ++reruns_;
  RerunReport report;
  report.step = step;
  report.trigger = trigger;
  report.trigger_text = rerun_->describe(trigger, original.result.loss, original.result.grad_norm);
  report.deterministic = config_.debug.deterministic;
  report.dataset = source_->describe();
  report.executions.push_back(describe_execution("original", original));
  const Snapshot after = snapshot();  // the original's result, for "stop"
  const LoaderState loader_after = loader_->state();
  const int64_t tokens_after = tokens_seen_;

  restore(before);
  report.sequences = sequence_losses(batches);
  if (original.trace.empty()) {  // untraced: execute it again, traced, to compare op by op
    restore(before);
    report.executions.push_back(describe_execution("original re-executed (traced)",
                                                   execute_step(step, batches, true, false)));
  }
  restore(before);
  const ExecutedStep rerun = execute_step(step, batches, true, false);
  report.executions.push_back(describe_execution("rerun", rerun));
  analyse_rerun(report);

  const bool non_finite = trigger == RerunTrigger::kNonFinite;
  StepResult result = original.result;
  switch (config_.debug.rerun_action) {
    case RerunAction::kStop:
      report.action = non_finite ? "stop: training ends (exit 1)"
                                 : "stop: the original's result is kept and training goes on";
      if (!non_finite) restore(after);
      break;
    case RerunAction::kSkip:
      report.action = "skip: the step's update is dropped; training goes on with the next batch";
      restore(before);
      result.skipped = true;
      break;
    case RerunAction::kContinue:
      report.action = "continue: the rerun's result is kept";
      result = rerun.result;
      break;
  }
  loader_->load_state(loader_after);
  step_ = step;
  tokens_seen_ = tokens_after;
  if (!result.skipped) rerun_->accept(result.loss);

  const std::string path = write_rerun_report(report);
  std::ostream& log = *ctx_.log;
  log << fmt::format("[titan] rerun check: step {} ({}): {}; report {}\n", step, to_string(trigger),
                     to_string(report.outcome), path);
  log << format_rerun_report(report);
  log.flush();
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
