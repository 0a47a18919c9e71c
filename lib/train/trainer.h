// The training loop: builds the model, data and optimizer for a RunContext and runs torchtitan's
// step (zero grads; accumulate micro-batches with loss = summed cross-entropy / tokens in the
// step; clip; AdamW; LR schedule) until training.steps. Checkpointing (train/checkpointer.h),
// the rerun check (train/rerun_check.h) and the outputs (train/run_outputs.h) are components
// with their own state; the Trainer owns the train state and applies it one way (apply).
// Run::open (train/run.h) puts a run together; nothing else constructs a Trainer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "data/loader.h"
#include "metrics/device_stats.h"
#include "metrics/fingerprint.h"
#include "model/kernels.h"
#include "model/llama.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/checkpointer.h"
#include "train/gradient_reducer.h"
#include "train/numerics_trace.h"
#include "train/rerun_check.h"
#include "train/run_context.h"
#include "train/run_outputs.h"
#include "train/step.h"

namespace titan {

struct TrainSummary {
  int64_t steps = 0;
  double seconds = 0;
  double mean_tps = 0;
  double checksum_seconds = 0;  // spent on fingerprint.log parameter checksums
  int64_t reruns = 0;           // steps the rerun check re-executed
  std::vector<double> losses;   // one per step
};

class Trainer : public StepReplay {
 public:
  // Validates what needs the model or data (memory, vocabulary, dataset files) before building
  // anything heavy; throws ConfigError for those. Then resumes (Checkpointer::resume_or_initialize)
  // and checks that every rank starts from the same parameters. Writes nothing. Requires:
  // `context` outlives the Trainer.
  explicit Trainer(const RunContext& context);
  ~Trainer() override;

  // The step the run resumed after (0 for a fresh run), and what fingerprint.log's header says.
  int64_t resume_step() const { return start_step_; }
  FingerprintHeader fingerprint_header() const;

  // Logs the start-up summary to `outputs`, which every later step writes to. Requires:
  // `outputs` outlives the Trainer; called once, before train() or train_step().
  void start(RunOutputs& outputs);

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

  // The numerics.log recorder; null when debug.numerics_trace is "none" and no rerun is armed.
  NumericsTracer* numerics_tracer() { return numerics_.get(); }

 private:
  void log_start(std::ostream& log) const;
  void check_replicas_agree();
  // After step 1 collectives wait comm.train_timeout_seconds instead of the init timeout.
  void adopt_train_timeout();
  void log_step(const StepResult& result, double seconds_since_log, int64_t steps_since_log);
  // One execution of step `step` on `batches` from the current state; its op-level record when
  // `capture_ops`; numerics.log lines when `write_log`.
  ExecutedStep execute_step(int64_t step, const std::vector<Batch>& batches, bool capture_ops,
                            bool write_log);

  const RunContext& ctx_;
  const Config& config_;  // ctx_.config
  ModelArgs args_;
  BatchPlan plan_;
  std::shared_ptr<const TokenSource> source_;
  std::unique_ptr<DataLoader> loader_;
  Transformer model_{nullptr};
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  LRSchedule schedule_;
  ModelKernels kernels_;
  std::vector<std::string> checkpointed_blocks_;
  std::shared_ptr<NumericsTracer> numerics_;
  StepOptions step_options_;
  std::unique_ptr<GradientReducer> reducer_;  // null for one process
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<RerunCheck> rerun_;  // null when no rerun trigger is armed
  RunOutputs* outputs_ = nullptr;      // from start()
  double flops_per_token_ = 0;
  // The train state: step, tokens, and (in the loader and the generators) the rest.
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  int64_t start_step_ = 0;
  std::vector<std::string> start_notes_;  // what was loaded, for the start-up log
  uint64_t initial_checksum_ = 0;         // of the parameters every rank started from
  bool train_timeout_adopted_ = false;
  double checksum_seconds_ = 0;
  CpuUsage cpu_at_last_log_;  // for the per-step CPU time in metrics.jsonl
};

}  // namespace titan
