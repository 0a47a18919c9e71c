// Precision attribution (debug.precision_steps): a listed step, after the run took it, is
// executed twice more from the state kept before it, on the same batch with the same RNG: once
// in the run's own dtype (checked bit for bit against the step the run took) and once in
// debug.precision_reference (float64), on copies of the model. Both executions record every
// top-level op of every block (lib/ac/op_trace.h, keep_values), each block's output, the logits,
// the loss and every parameter's gradient. Each op is then run once more alone, in the run's
// dtypes on the reference's inputs rounded to them: its added error. The report
// (lib/train/precision_report.h) goes to the console and
// <dump_folder>/precision/step<N>.{txt,json}.
//
// The run is untouched: the copies and their gradients are discarded, and the RNG state is put
// back as the step left it. One process only (check_precision_steps refuses more).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/loader.h"
#include "determinism/rng_state.h"
#include "model/llama.h"
#include "instruments/numerics_trace.h"
#include "instruments/precision_report.h"
#include "step/step.h"

namespace titan {

class PrecisionProbe {
 public:
  // `options` are the run's step options (device, autocast, grad_norm accumulation).
  PrecisionProbe(const Config& config, const ModelArgs& args, const StepOptions& options);

  // Whether step `step` is listed in debug.precision_steps.
  bool probes(int64_t step) const { return steps_.count(step) > 0; }

  // The state a precision step starts from: the parameters (copied) and the RNG.
  struct KeptState {
    std::vector<std::pair<std::string, at::Tensor>> params;
    RngState rng;
  };
  KeptState keep_state(Transformer& model) const;

  // After step `step` ran on `batches` from `before`, with result `run`: executes it again twice,
  // compares, writes the report files and prints the summary to `console`. Leaves the RNG state
  // as it found it. Throws RuntimeFailure when the report cannot be written.
  PrecisionReport measure(int64_t step, const KeptState& before, const std::vector<Batch>& batches,
                          const StepResult& run, std::ostream& console);

  // The test-only seam of lib/train/numerics_trace.h, applied to both executions' block outputs.
  void set_block_output_hook(std::shared_ptr<BlockOutputHook> hook) { hook_ = std::move(hook); }

  // Time spent in measure, and how many steps it measured (the end-of-run cost line).
  double seconds() const { return seconds_; }
  int64_t steps_measured() const { return measured_; }

 private:
  struct Execution;
  Execution execute(int64_t step, const KeptState& before, const std::vector<Batch>& batches,
                    bool reference) const;
  void write_files(const PrecisionReport& report) const;

  const Config& config_;
  ModelArgs args_;
  StepOptions options_;
  std::set<int64_t> steps_;
  std::shared_ptr<BlockOutputHook> hook_;
  double seconds_ = 0;
  int64_t measured_ = 0;
};

}  // namespace titan
