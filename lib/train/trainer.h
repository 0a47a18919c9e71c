// The training loop over a run's components (train/run_components.h): the step engine's steps until
// training.steps, the instruments called around each step, checkpoints saved at their points, and
// every step written to the run's outputs. Run::open (train/run.h) puts a run together; nothing
// else constructs a Trainer.
#pragma once

#include <cstdint>
#include <vector>

#include "instruments/instrument.h"
#include "metrics/device_stats.h"
#include "step/step_engine.h"
#include "train/run_components.h"
#include "train/run_outputs.h"
#include "train/summary.h"
#include "util/stopwatch.h"

namespace titan {

class Trainer {
 public:
  // Applies the components' start point. Writes nothing. Requires: `run` and `outputs` outlive
  // the Trainer.
  Trainer(RunComponents& run, RunOutputs& outputs);

  // Runs the remaining steps, saving checkpoints when enabled (every checkpoint.interval steps
  // and at the last). SIGTERM or SIGINT: with checkpoints, the current step ends, a checkpoint is
  // saved and train() returns (a second signal aborts that save: StoppedBySignal); without,
  // StoppedBySignal between steps. Throws RuntimeFailure (exit 1) on a non-finite loss, and
  // CheckFailure (exit 3) when debug.deterministic meets an op without a deterministic
  // implementation (unless deterministic_warn_only) or the recompute checker finds a difference.
  TrainSummary train();

  // One optimizer step with its instruments, and its fingerprint.log line.
  StepOutcome train_step();

  StepEngine& engine() { return *run_.engine; }

  // What a checkpoint saves of this rank besides the tensors: the engine's train state and the
  // instruments' positions.
  TrainState checkpoint_state() const;

 private:
  // After step 1 collectives wait comm.train_timeout_seconds instead of the init timeout.
  void adopt_train_timeout();
  void log_step(const StepOutcome& outcome, double seconds_since_log, int64_t steps_since_log);
  // Whether step `step` is logged (step 1, every metrics.log_freq steps, the last).
  bool logs_step(int64_t step) const;
  void check_finite(const StepOutcome& outcome) const;
  void write_fingerprint(const StepOutcome& outcome);

  const RunContext& ctx_;
  const Config& config_;  // ctx_.config
  RunComponents& run_;
  RunOutputs& outputs_;
  bool train_timeout_adopted_ = false;
  CostMeter checksums_;       // fingerprint.log's parameter checksums
  CpuUsage cpu_at_last_log_;  // for the per-step CPU time in metrics.jsonl
};

}  // namespace titan
