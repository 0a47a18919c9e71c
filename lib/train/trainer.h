// The training loop: builds the model, data and optimizer for a RunContext and runs torchtitan's
// step (zero grads; accumulate micro-batches with loss = summed cross-entropy / tokens in the
// step; clip; AdamW; LR schedule) until training.steps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ac/checkpoint.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "data/loader.h"
#include "metrics/device_stats.h"
#include "model/llama.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/gradient_reducer.h"
#include "train/numerics_trace.h"
#include "train/rerun.h"
#include "train/run_context.h"
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

class Trainer {
 public:
  // Validates what needs the model or data (memory, vocabulary, dataset files) before building
  // anything heavy; throws ConfigError for those. With checkpoint.enable, resumes from the latest
  // complete checkpoint (or checkpoint.load_step) and sets context.resume_step; else loads
  // checkpoint.initial_load_path when set. A damaged checkpoint is RuntimeFailure, one that does
  // not fit the config ConfigError. Writes nothing: the app opens the context's output sinks
  // after this succeeds. Requires: `context` outlives the Trainer.
  explicit Trainer(RunContext& context);
  ~Trainer();

  // Opens the trainer's own output (numerics.log, or removes a stale one) and logs the start-up
  // summary. Requires: the context's output sinks are open (the dump folder is locked).
  void start();

  // Runs the remaining steps, saving checkpoints when enabled (every checkpoint.interval steps
  // and at the last). SIGTERM or SIGINT: with checkpoints, the current step ends, a checkpoint is
  // saved and train() returns (a second signal aborts that save: StoppedBySignal); without,
  // StoppedBySignal between steps. Throws RuntimeFailure (exit 1) on a non-finite loss, and
  // CheckFailure (exit 3) when debug.deterministic meets an op without a deterministic
  // implementation (unless deterministic_warn_only) or the recompute checker finds a difference.
  TrainSummary train();

  // One optimizer step, with its fingerprint.log line. With debug.rerun_* armed, keeps the state
  // before the step in memory and reruns the step when a trigger fires (lib/train/rerun.h).
  StepResult train_step();

  // The state the next step depends on besides the tensors (RNG states read now).
  TrainState state() const;

  // In-memory copy of everything the next steps depend on, and its restoration: the steps that
  // follow a restore reproduce those that followed the snapshot, bit for bit.
  Snapshot snapshot() const;
  void restore(const Snapshot& snapshot);

  // The numerics.log recorder; null when debug.numerics_trace is "none".
  NumericsTracer* numerics_tracer() { return numerics_.get(); }

 private:
  void log_start() const;
  // Data parallelism: every rank starts from the same parameters (checksums compared once).
  void check_replicas_agree();
  // After step 1 collectives wait comm.train_timeout_seconds instead of the init timeout.
  void adopt_train_timeout();
  void log_step(const StepResult& result, double seconds_since_log, int64_t steps_since_log);
  // After SIGTERM or SIGINT (util/stop_signal.h): with checkpoints, saves one (unless this step
  // has one) and returns true; without, throws StoppedBySignal. False when no signal arrived.
  bool stop_requested();
  // Checkpoints (trainer_checkpoint.cpp).
  void resume_or_initialize();
  void resume_from(int64_t step);
  void load_initial_weights(const std::string& path);
  bool checkpoint_due(int64_t step) const;
  void save_checkpoint_now(bool final_save);
  // Warns once on stderr when the console stream fails (a closed pipe, a full disk).
  void check_console();
  // One execution of step `step` on `batches` from the current state; `trace` holds its
  // numerics text when it was traced at op level (`capture_ops`), else "".
  struct ExecutedStep {
    StepResult result;
    std::string trace;
  };
  ExecutedStep execute_step(int64_t step, const std::vector<Batch>& batches, bool capture_ops,
                            bool write_log);
  // The rerun check (trainer_rerun.cpp). The step has run from `before` on `batches`, and
  // step_ counts it; reruns it, reports, and applies debug.rerun_action. Returns the step's
  // result as it stands (skipped: the original's, marked).
  Snapshot keep_state_before_step();
  StepResult rerun_step(RerunTrigger trigger, const Snapshot& before,
                        const std::vector<Batch>& batches, const ExecutedStep& original);
  StepExecution describe_execution(const std::string& label, const ExecutedStep& e) const;
  std::vector<SequenceLoss> sequence_losses(const std::vector<Batch>& batches);
  std::string write_rerun_report(const RerunReport& report) const;
  void log_rerun_cost(double step_seconds) const;

  RunContext& ctx_;
  const Config& config_;  // ctx_.config
  ModelArgs args_;
  BatchPlan plan_;
  std::shared_ptr<const TokenSource> source_;
  std::unique_ptr<DataLoader> loader_;
  Transformer model_{nullptr};
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  LRSchedule schedule_;
  std::shared_ptr<ac::CheckpointContext> ac_context_ = std::make_shared<ac::CheckpointContext>();
  std::vector<std::string> checkpointed_blocks_;
  std::shared_ptr<NumericsTracer> numerics_;
  StepOptions step_options_;
  double flops_per_token_ = 0;
  double checksum_seconds_ = 0;
  CpuUsage cpu_at_last_log_;  // for the per-step CPU time in metrics.jsonl
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  bool console_failed_ = false;
  std::string checkpoint_folder_;             // <dump_folder>/<checkpoint.folder>
  int64_t last_saved_step_ = -1;              // the step of this run's latest checkpoint
  std::vector<std::string> start_notes_;      // what was loaded, for the start-up log
  std::unique_ptr<RerunMonitor> rerun_;       // null when no rerun trigger is armed
  std::unique_ptr<GradientReducer> reducer_;  // null for one process
  uint64_t initial_checksum_ = 0;             // of the parameters every rank started from
  bool train_timeout_adopted_ = false;
  int64_t exchanges_ = 0;  // store exchanges of this run, for their unique keys
  struct KeepCost {
    int64_t steps = 0;
    double seconds = 0;
    double bytes = 0;  // of the latest kept state
  } keep_cost_;
  int64_t reruns_ = 0;
};

}  // namespace titan
