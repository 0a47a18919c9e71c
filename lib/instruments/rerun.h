// The rerun check (debug.rerun_*): when a step goes wrong (a non-finite loss or grad_norm, a loss
// spike) or is listed in rerun_steps, the step is executed again from the state kept in memory
// before it, on the same batch, with op-level numerics traces, and the executions are compared
// bit for bit:
//  - not reproducible (they differ): nondeterminism or a transient machine fault; the report
//    names the first op whose output differs;
//  - reproducible (same bits): the data or the model state; the report lists the batch's
//    provenance, the loss of each sequence and the largest activations and gradients by block.
// For a non-finite step it also names the first op, in forward order, with a non-finite output.
//
// This file holds the decisions and the report; the instrument (instruments/rerun_check.h) keeps
// the state and re-executes the steps through the step engine.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/compare.h"
#include "config/config.h"
#include "data/loader.h"
#include "instruments/instruments.h"
#include "instruments/layer_window.h"
#include "metrics/numerics_log.h"

namespace titan {

enum class RerunTrigger { kNonFinite, kSpike, kRequested };

// Which steps keep their state and which are rerun. The spike window holds the losses of the
// steps that were applied (a skipped step's is left out); it starts empty in every process.
class RerunMonitor {
 public:
  explicit RerunMonitor(const DebugConfig& debug);

  // Whether any trigger is configured.
  bool armed() const;
  // Whether step `step` may be rerun, so the state before it must be kept.
  bool keeps_state_before(int64_t step) const;
  // Whether `step` is in rerun_steps (its original execution is traced: it will be rerun).
  bool requested(int64_t step) const;
  // The trigger step `step`'s result fires (non-finite first, then spike, then requested).
  std::optional<RerunTrigger> trigger(int64_t step, double loss, double grad_norm) const;
  // "loss 9.1 > 3 x 2.2 (mean of the last 20 losses)", "loss nan", "debug.rerun_steps".
  std::string describe(RerunTrigger trigger, double loss, double grad_norm) const;
  // Adds an applied step's loss to the spike window.
  void accept(double loss);

 private:
  bool window_full() const;
  double window_mean() const;

  DebugConfig debug_;
  std::deque<double> window_;
  double window_sum_ = 0;
};

// One execution of a step, as the check compares them.
struct StepExecution {
  std::string label;  // "original", "original re-executed (traced)", "rerun"
  double loss = 0;
  double grad_norm = 0;
  uint64_t gradients = 0;             // checksum of every parameter's gradient before the update
  std::optional<NumericsStep> trace;  // the numerics tracer's op-level record, when traced
};

// Whether two executions computed the same bits (loss, grad_norm, gradients).
bool same_result(const StepExecution& a, const StepExecution& b);

enum class RerunOutcome { kReproducible, kNotReproducible };

// The largest |value| seen in one part of the model ("layers.3", "output").
struct BlockExtremes {
  std::string name;
  double activation = 0;  // the part's output (all micro-batches)
  std::string top_op;     // inside a block: the op with the largest output ("#12 aten::mm")
  double top_op_value = 0;
  double gradient = 0;  // over the part's parameters
};

struct SequenceLoss {
  int64_t micro_batch = 0, sequence = 0;
  double loss = 0;  // mean cross-entropy over the sequence's tokens, before the step
  std::vector<DocumentSpan> sources;
};

struct RerunReport {
  int64_t step = 0;
  RerunTrigger trigger = RerunTrigger::kRequested;
  std::string trigger_text;
  RerunOutcome outcome = RerunOutcome::kReproducible;
  bool deterministic = false;  // debug.deterministic was on
  std::vector<StepExecution> executions;
  std::optional<NumericsDifference> first_difference;  // not reproducible: the first op or tensor
  std::pair<std::string, std::string> difference_between;  // the two executions' labels
  std::string difference_note;                             // when no traced difference names it
  std::optional<NumericsEntry> first_non_finite;           // forward order, then gradients
  std::string dataset;                                     // the data source, as logged at start
  std::vector<SequenceLoss> sequences;
  std::vector<BlockExtremes> extremes;
  std::vector<LayerNormsAt> layer_window;  // the measured steps up to the trigger step
  std::string action;                      // what followed, as the log says it
};

// Fills outcome, first_difference (or difference_note), first_non_finite and extremes from
// `report.executions` (the first is the original; traced ones carry their trace).
void analyse_rerun(RerunReport& report);

// The report as text (also written to <dump_folder>/rerun/step<N>.txt).
std::string format_rerun_report(const RerunReport& report);

const char* to_string(RerunTrigger trigger);
const char* to_string(RerunOutcome outcome);

}  // namespace titan
