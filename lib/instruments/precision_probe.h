// Precision attribution (debug.precision_steps): a listed step, after the run took it, is
// executed twice more from the state kept before it, on the same batch with the same RNG, by
// run_step on copies of the model: once in the run's own dtype (checked bit for bit against the
// step the run took) and once in debug.precision_reference (float64). Both executions record
// every top-level op of every block (lib/ac/op_trace.h, keep_values), each block's output, the
// logits, the loss and every parameter's gradient. Each op is then run once more alone, in the
// run's dtypes on the reference's inputs rounded to them: its added error. The report
// (instruments/precision_report.h) goes to the console and <dump_folder>/precision/step<N>.{txt,
// json}. Under debug.batch_invariant the executions are batch-invariant too (one sequence per
// forward): the report's micro-batches are then the sequences.
//
// The run is untouched: the copies and their gradients are discarded, and the RNG state is put
// back as the step left it. One process only (check_precision_steps refuses more).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/run_folder.h"
#include "data/loader.h"
#include "determinism/rng_state.h"
#include "instruments/instrument.h"
#include "instruments/numerics_trace.h"
#include "instruments/precision_report.h"
#include "model/model.h"
#include "step/step.h"
#include "util/stopwatch.h"

namespace titan {

class PrecisionProbe : public Instrument {
 public:
  // `options` are the run's step options (device, autocast, grad_norm accumulation, batch
  // invariance); reports go to `folder`'s precision/.
  PrecisionProbe(const Config& config, const RunFolder& folder, const ModelArgs& args,
                 const StepOptions& options);

  // Instrument: the steps listed in debug.precision_steps.
  const char* name() const override { return "precision attribution"; }
  bool wants_step(int64_t step) const override { return steps_.count(step) > 0; }
  void open_outputs(int64_t resume_step) override;  // precision/
  void before_step(StepContext& context) override;  // keeps the parameters and the RNG
  void after_step(StepContext& context, StepOutcome& outcome) override;  // measure
  std::string cost_line(const RunTotals& totals) const override;

  // The state a precision step starts from: the parameters (copied) and the RNG.
  struct KeptState {
    std::vector<std::pair<std::string, at::Tensor>> params;
    // The model's state besides its parameters that the step depends on (TrainState's
    // model_buffers: each MoE layer's expert bias, by name).
    std::map<std::string, at::Tensor> buffers;
    RngState rng;
  };
  KeptState keep_state(const Model& model) const;

  // After step `step` ran on `batches` from `before`, with result `run`: executes it again twice,
  // compares, writes the report files and prints the summary to `console`. Leaves the RNG state
  // as it found it. Throws RuntimeFailure when the report cannot be written.
  PrecisionReport measure(int64_t step, const KeptState& before, const std::vector<Batch>& batches,
                          const StepOutcome& run, std::ostream& console);

  // measure's executions and comparison alone: writes and prints nothing. With `run` null the
  // execution in the run's dtype is the run (a replay): its loss and grad_norm are the report's
  // and reexecution_bitwise is true. Leaves the RNG state as it found it.
  PrecisionReport attribute(int64_t step, const KeptState& before,
                            const std::vector<Batch>& batches, const StepOutcome* run);

  // The test-only seam of lib/train/numerics_trace.h, applied to both executions' block outputs.
  void set_block_output_hook(std::shared_ptr<BlockOutputHook> hook) { hook_ = std::move(hook); }

  // Time spent in measure, and how many steps it measured (the end-of-run cost line).
  const CostMeter& cost() const { return cost_; }

 private:
  struct Execution;
  Execution execute(int64_t step, const KeptState& before, const std::vector<Batch>& batches,
                    bool reference) const;
  void write_files(const PrecisionReport& report) const;

  const Config& config_;
  RunFolder folder_;
  ModelArgs args_;
  StepOptions options_;
  std::set<int64_t> steps_;
  std::shared_ptr<BlockOutputHook> hook_;
  std::optional<KeptState> kept_;  // before the step being measured
  CostMeter cost_;
};

}  // namespace titan
