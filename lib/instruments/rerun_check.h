// The rerun check as an instrument (decisions and report: instruments/rerun.h): keeps the state
// before the steps that may be rerun, re-executes a step from it through the engine when a
// trigger fires (traced at op level by the numerics tracer), reports, and applies
// debug.rerun_action.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/snapshot.h"
#include "config/config.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "instruments/layer_window.h"
#include "instruments/numerics_trace.h"
#include "instruments/rerun.h"
#include "util/stopwatch.h"

namespace titan {

class RerunCheck : public Instrument {
 public:
  // `tracer` records the executions it compares (every step's original when listed in
  // debug.rerun_steps, and its re-executions); `dataset` is the data source as the start-up log
  // names it; `rank` names the report files. Requires: debug has a trigger (rerun_armed).
  RerunCheck(const Config& config, const RunFolder& folder, std::shared_ptr<NumericsTracer> tracer,
             std::string dataset, int64_t rank);

  // Instrument: every step (the spike window and the layer window follow all of them).
  const char* name() const override { return "rerun check"; }
  bool wants_step(int64_t) const override { return true; }
  std::string describe() const override;
  void open_outputs(int64_t resume_step) override;  // rerun/
  // Keeps the state before the step when it may be rerun (its cost is counted).
  void before_step(StepContext& context) override;
  // When a trigger fires: reruns the step, writes <dump_folder>/rerun/step<N>.txt, logs the
  // report and applies debug.rerun_action to `outcome` and the engine's state (skipped: the
  // original's, marked). Throws RuntimeFailure for a non-finite step under "stop".
  void after_step(StepContext& context, StepOutcome& outcome) override;
  // State kept, memory, time per step against the mean step, reruns.
  std::string cost_line(const RunTotals& totals) const override;
  int64_t reruns() const { return reruns_; }

 private:
  StepOutcome rerun(RerunTrigger trigger, StepContext& context, const StepOutcome& original);
  // One execution of the step from `before`, traced at op level.
  StepOutcome execute_traced(StepContext& context);
  StepExecution describe_execution(const std::string& label, const StepOutcome& outcome,
                                   const StepEngine& engine) const;
  std::vector<SequenceLoss> sequence_losses(StepContext& context);
  std::string write_report(const RerunReport& report) const;

  const Config& config_;
  RunFolder folder_;
  std::shared_ptr<NumericsTracer> tracer_;
  RerunMonitor monitor_;
  std::string dataset_;
  int64_t rank_ = 0;
  std::optional<Snapshot> before_;  // the state before the current step, when kept
  CostMeter keep_cost_;             // keeping the state before steps
  double kept_bytes_ = 0;           // of the latest kept state
  int64_t reruns_ = 0;
  LayerWindow layer_window_;  // the per-layer norms of the last rerun_window steps
};

}  // namespace titan
