// Recording <dump_folder>/numerics.log (format: lib/metrics/numerics_log.h) during training.
//
// A ForwardObserver on the model: every debug.numerics_freq-th step it records the checksum,
// mean and max abs of the embedding output, each block's output, the final norm's output and
// the logits (per micro-batch), then, before clipping, of every parameter's gradient in backward
// order. With level "ops" it also records each block's top-level ATen ops with the recompute
// checker's op tracer (lib/ac/op_trace.h), a checksum and max abs per op output. Steps not traced
// cost one branch per stage.
//
// A step is recorded as a NumericsStep (numbers, not text), handed on in the step's outcome; the
// text exists only in the file. The rerun check (instruments/rerun_check.h) also asks for
// op-level records of single executions, whatever numerics.log records (or whether it is written
// at all): the steps listed in debug.rerun_steps, and its re-executions (trace_next_execution).
// With activation checkpointing and its recompute checker, a checked block's ops come from the
// checker's forward trace: the tracer is the checker's ac::OpTraceSink.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ac/op_trace.h"
#include "ac/recompute.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "metrics/numerics_log.h"
#include "model/model.h"
#include "util/files.h"

namespace titan {

// A test-only seam (no config key reaches it): called with each block's output inside the
// block's op trace, before the output is recorded, so that a planted change is traced as one of
// the block's ops. Production runs install none.
class BlockOutputHook {
 public:
  virtual ~BlockOutputHook() = default;
  // May replace `output` (keeping its shape, dtype and device).
  virtual void on_block_output(int64_t step, int64_t layer, at::Tensor& output) = 0;
};

class NumericsTracer : public Instrument, public ForwardObserver, public ac::OpTraceSink {
 public:
  // `level` is what numerics.log (at `log_path`) records (kNone: no file, records for the rerun
  // check only); `op_steps` are the run's steps recorded at op level whatever the level
  // (debug.rerun_steps). Writes nothing until open_outputs().
  NumericsTracer(NumericsTrace level, int64_t freq, std::string log_path,
                 std::set<int64_t> op_steps = {});
  ~NumericsTracer() override;

  // Instrument: every step (a step it does not trace costs one branch per stage); the run's own
  // steps are recorded as numerics.log's level says, its re-executions as trace_next_execution
  // asks.
  const char* name() const override { return "numerics trace"; }
  bool wants_step(int64_t) const override { return true; }
  void step_starting(const StepRequest& request) override;
  void gradients_ready(const StepRequest& request) override;
  // The op-level record of an execution recorded for the rerun check (op_steps, or
  // trace_next_execution) goes into the outcome as a NumericsStep finding.
  void step_finished(const StepRequest& request, StepOutcome& outcome) override;
  std::string describe() const override;  // "" when numerics.log is not written
  // Opens numerics.log when the level writes it (see open).
  void open_outputs(int64_t resume_step) override;

  // The next execution it observes is recorded at op level and writes nothing to numerics.log
  // (a re-execution of a step).
  void trace_next_execution() { trace_next_ = true; }

  // Observes `model`'s forwards and remembers its parameters for the gradients.
  void attach(Model& model);
  // FSDP: the parameters hold no gradient after the backward, so `source` hands the full
  // gradients to record_gradients instead, in backward order (it is collective: every rank
  // records the same steps). Null: the parameters' own.
  using GradientVisitor = std::function<void(const std::string& name, const at::Tensor& grad)>;
  void set_gradient_source(std::function<void(const GradientVisitor&)> source) {
    gradient_source_ = std::move(source);
  }

  // Writes the header to `path`, followed (for a run resumed after step `resume_step` > 0) by the
  // old file's steps up to it. Throws RuntimeFailure naming the path.
  void open(const std::string& path, int64_t resume_step = 0);

  // Starts step `step`. It is traced at the file's level when numerics.log records it (a level
  // other than none, step % freq == 0 and `write_log`), and at op level when `capture_ops`.
  void begin_step(int64_t step, bool capture_ops = false, bool write_log = true);
  bool tracing() const { return tracing_; }
  bool writes_log() const { return level_ != NumericsTrace::kNone; }
  // Records every parameter's gradient (call before clipping).
  void record_gradients();
  // Ends the step: appends its lines to numerics.log (flushed) when it records this step, and
  // returns the step's record, op entries included when captured; nullopt when not traced.
  std::optional<NumericsStep> end_step();

  // Installs (or, with null, removes) the test-only hook.
  void set_block_output_hook(std::shared_ptr<BlockOutputHook> hook) { hook_ = std::move(hook); }

  // ForwardObserver
  void block_starting(int64_t layer) override;
  void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) override;
  // ac::OpTraceSink: a checked block's forward ops, while this tracer records the block's ops.
  bool wants_ops() const override { return recorder_ != nullptr; }
  void add_ops(const std::vector<ac::OpRecord>& ops) override;

 private:
  void add_op_entries(const std::string& block);

  NumericsTrace level_;
  int64_t freq_;
  std::string log_path_;
  std::set<int64_t> op_steps_;
  bool trace_next_ = false;
  bool captured_ = false;           // this execution's op-level record goes into its outcome
  bool logging_ = false;            // this step goes to numerics.log
  bool ops_ = false;                // this step records ops
  std::unique_ptr<LineFile> file_;  // numerics.log, whole lines (null until open())
  std::vector<std::pair<std::string, at::Tensor>> params_;  // backward order
  std::function<void(const GradientVisitor&)> gradient_source_;
  bool tracing_ = false;
  int64_t micro_ = -1;
  NumericsStep record_;  // the current step
  ac::OpTrace trace_;    // the current block's ops
  std::unique_ptr<ac::TraceRecorder> recorder_;
  std::shared_ptr<BlockOutputHook> hook_;
};

// The tracer debug.numerics_trace asks for, writing to `log_path` and attached to `model`; null
// for "none" unless the rerun check is armed (it needs op traces). Touches no file.
std::shared_ptr<NumericsTracer> make_numerics_tracer(const DebugConfig& debug, Model& model,
                                                     const std::string& log_path);

// With debug.numerics_trace "none", removes the numerics.log an earlier run left at `log_path`:
// compare would read it as this run's. Call with the run's outputs.
void remove_stale_numerics_log(const DebugConfig& debug, const std::string& log_path);

}  // namespace titan
