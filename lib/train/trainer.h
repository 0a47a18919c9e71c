// The training loop over a run's parts (train/run_parts.h): torchtitan's step (zero grads;
// accumulate micro-batches with loss = summed cross-entropy / tokens in the step; clip; AdamW;
// LR schedule) until training.steps, with the components (checkpointing, the rerun check) at
// their points in the loop and every step written to the run's outputs. The Trainer owns the
// train state (step, tokens seen, the loader's position and the generators) and sets it one way
// (apply): at the start point, for snapshot restores and for the rerun check. Run::open
// (train/run.h) puts a run together; nothing else constructs a Trainer.
#pragma once

#include <optional>
#include <vector>

#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "metrics/device_stats.h"
#include "instruments/layer_norms.h"
#include "instruments/rerun_check.h"
#include "train/run_log.h"
#include "train/run_outputs.h"
#include "train/run_parts.h"
#include "step/step.h"

namespace titan {

class Trainer : public StepReplay {
 public:
  // Applies the parts' start point. Writes nothing. Requires: `parts` and `outputs` outlive the
  // Trainer.
  Trainer(RunParts& parts, RunOutputs& outputs);
  ~Trainer() override;

  // Runs the remaining steps, saving checkpoints when enabled (every checkpoint.interval steps
  // and at the last). SIGTERM or SIGINT: with checkpoints, the current step ends, a checkpoint is
  // saved and train() returns (a second signal aborts that save: StoppedBySignal); without,
  // StoppedBySignal between steps. Throws RuntimeFailure (exit 1) on a non-finite loss, and
  // CheckFailure (exit 3) when debug.deterministic meets an op without a deterministic
  // implementation (unless deterministic_warn_only) or the recompute checker finds a difference.
  TrainSummary train();

  // One optimizer step, with its fingerprint.log line. With debug.rerun_* armed, keeps the state
  // before the step in memory and reruns the step when a trigger fires.
  StepResult train_step();

  // StepReplay: the train state (RNG states read now), snapshots (in-memory copies of everything
  // the next steps depend on: the steps that follow a restore reproduce those that followed the
  // snapshot, bit for bit), and re-execution for the rerun check.
  TrainState state() const override;
  void apply(const TrainState& state) override;
  Snapshot snapshot() const override;
  void restore(const Snapshot& snapshot) override;
  ExecutedStep execute_traced(int64_t step, const std::vector<Batch>& batches) override;
  std::vector<SequenceLoss> sequence_losses(const std::vector<Batch>& batches) override;
  uint64_t gradients_checksum() const override;

 private:
  // After step 1 collectives wait comm.train_timeout_seconds instead of the init timeout.
  void adopt_train_timeout();
  void log_step(const StepResult& result, double seconds_since_log, int64_t steps_since_log);
  // This rank's micro-batches of the next step (under debug.batch_invariant, its contiguous part
  // of the step's global batch).
  std::vector<Batch> draw_micro_batches();
  // Whether step `step` is logged (step 1, every metrics.log_freq steps, the last).
  bool logs_step(int64_t step) const;
  // Whether TensorBoard gets step `step`'s histograms (metrics.histogram_freq).
  bool histograms_at(int64_t step) const;
  // One execution of step `step` on `batches` from the current state; its op-level record when
  // `capture_ops`; numerics.log lines when `write_log`.
  ExecutedStep execute_step(int64_t step, const std::vector<Batch>& batches, bool capture_ops,
                            bool write_log);

  const RunContext& ctx_;
  const Config& config_;  // ctx_.config
  RunParts& parts_;
  RunOutputs& outputs_;
  StepOptions step_options_;  // the parts', with this step's callbacks
  // The train state: step, tokens, and (in the loader and the generators) the rest.
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  bool train_timeout_adopted_ = false;
  double checksum_seconds_ = 0;
  CpuUsage cpu_at_last_log_;  // for the per-step CPU time in metrics.jsonl
  // Per-layer norms: measured at logged steps (and every step for the rerun check's window).
  LayerNormMeter layer_norms_;
  std::vector<PartNorms> last_layers_;  // of the latest measured step
  double last_max_loss_ = 0;            // the latest logged step's largest per-rank loss
};

}  // namespace titan
