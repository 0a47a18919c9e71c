// The rerun check as a component (decisions and report: lib/train/rerun.h): keeps the state
// before the steps that may be rerun, re-executes a step from it when a trigger fires, reports,
// and applies debug.rerun_action. It drives the steps through StepReplay, which the Trainer
// implements.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/snapshot.h"
#include "config/config.h"
#include "data/loader.h"
#include "instruments/rerun.h"
#include "step/step.h"

namespace titan {

// One execution of a step: its result, and its op-level numerics record when it was captured.
struct ExecutedStep {
  StepResult result;
  std::optional<NumericsStep> trace;
  std::vector<PartNorms> layers;  // measured for the first execution of a step (see LayerNormMeter)
};

// What the rerun check needs of the training loop.
class StepReplay {
 public:
  virtual ~StepReplay() = default;
  virtual Snapshot snapshot() const = 0;
  // Restores a snapshot (model, optimizer, TrainState).
  virtual void restore(const Snapshot& snapshot) = 0;
  // The current TrainState, and the one way to set it.
  virtual TrainState state() const = 0;
  virtual void apply(const TrainState& state) = 0;
  // Executes step `step` on `batches` from the current state, traced at op level, writing no
  // numerics.log lines.
  virtual ExecutedStep execute_traced(int64_t step, const std::vector<Batch>& batches) = 0;
  // Each sequence's loss under the current parameters, without dropout.
  virtual std::vector<SequenceLoss> sequence_losses(const std::vector<Batch>& batches) = 0;
  // Checksum of every parameter's gradient as the last step left them.
  virtual uint64_t gradients_checksum() const = 0;
};

class RerunCheck {
 public:
  // `dataset` is the data source as the start-up log names it; `rank` names the report files.
  RerunCheck(const Config& config, std::string dataset, int64_t rank);

  // Whether any trigger is configured (a check with none is not built).
  static bool armed(const DebugConfig& debug);

  // Whether the state before step `step` must be kept, and whether its first execution must be
  // traced (it is listed in debug.rerun_steps: it will be rerun).
  bool keeps_state_before(int64_t step) const { return monitor_.keeps_state_before(step); }
  bool traces_original(int64_t step) const { return monitor_.requested(step); }

  // The state before the step, kept in memory (its cost is counted for log_cost).
  Snapshot keep_state(const StepReplay& replay);

  // After step `step` ran on `batches` (the replay's state is after it), from `before` when its
  // state was kept (keeps_state_before): when a trigger fires, reruns it, writes
  // <dump_folder>/rerun/step<N>.txt, logs the report and applies debug.rerun_action, returning the
  // step's result as it stands (skipped: the original's, marked); else returns the original's.
  // Throws RuntimeFailure for a non-finite step under "stop".
  StepResult check(int64_t step, const std::optional<Snapshot>& before,
                   const std::vector<Batch>& batches, const ExecutedStep& original,
                   StepReplay& replay, std::ostream& console);

  // The end-of-run line: state kept, memory, time per step against `step_seconds`, reruns.
  void log_cost(double step_seconds, std::ostream& console) const;
  int64_t reruns() const { return reruns_; }

 private:
  StepResult rerun(RerunTrigger trigger, int64_t step, const Snapshot& before,
                   const std::vector<Batch>& batches, const ExecutedStep& original,
                   StepReplay& replay, std::ostream& console);
  std::string write_report(const RerunReport& report) const;

  const Config& config_;
  RerunMonitor monitor_;
  std::string dataset_;
  int64_t rank_ = 0;
  struct KeepCost {
    int64_t steps = 0;
    double seconds = 0;
    double bytes = 0;  // of the latest kept state
  } keep_cost_;
  int64_t reruns_ = 0;
  LayerWindow layer_window_;  // the per-layer norms of the last rerun_window steps
};

}  // namespace titan
