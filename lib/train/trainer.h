// The training loop: builds the model, data, optimizer and metrics from a Config and runs
// torchtitan's step (zero grads; accumulate micro-batches with loss = summed cross-entropy /
// tokens in the step; clip; AdamW; LR schedule) for training.steps steps.
#pragma once

#include <c10/core/Device.h>

#include <iosfwd>
#include <memory>
#include <vector>

#include "ac/checkpoint.h"
#include "config/config.h"
#include "data/loader.h"
#include "determinism/determinism.h"
#include "distributed/world.h"
#include "metrics/fingerprint.h"
#include "metrics/metrics.h"
#include "model/llama.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/numerics_trace.h"
#include "train/step.h"

namespace titan {

struct TrainSummary {
  int64_t steps = 0;
  double seconds = 0;
  double mean_tps = 0;
  double checksum_seconds = 0;  // spent on fingerprint.log parameter checksums
  std::vector<double> losses;   // one per step
};

class Trainer {
 public:
  // Validates what needs the model or data (device, vocabulary, dataset files) before building
  // anything heavy; throws ConfigError for those. Writes <dump_folder>/config.toml (with the
  // seed actually used). Logs to `log`.
  Trainer(const Config& config, std::ostream& log);
  ~Trainer();

  // Runs the remaining steps. Throws RuntimeFailure (exit 1) on a non-finite loss, and
  // CheckFailure (exit 3) when debug.deterministic meets an op without a deterministic
  // implementation (unless deterministic_warn_only).
  TrainSummary train();

  // One optimizer step, with its fingerprint.log line. Exposed for tests.
  StepResult train_step();

  Transformer& model() { return model_; }
  const DeterminismRecord& determinism() const { return determinism_; }
  int64_t gradient_accumulation_steps() const { return grad_accum_steps_; }
  // The numerics.log recorder; null when debug.numerics_trace is "none".
  NumericsTracer* numerics_tracer() { return numerics_.get(); }

 private:
  void log_start() const;
  void log_step(const StepResult& result, double seconds_since_log, int64_t steps_since_log);

  Config config_;
  std::ostream& log_;
  WorldInfo world_;
  DeterminismRecord determinism_;
  c10::Device device_;
  ModelArgs args_;
  std::shared_ptr<const TokenSource> source_;
  std::unique_ptr<DataLoader> loader_;
  Transformer model_{nullptr};
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  LRSchedule schedule_;
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<FingerprintLog> fingerprint_;
  std::shared_ptr<NumericsTracer> numerics_;
  std::shared_ptr<CheckpointContext> ac_context_ = std::make_shared<CheckpointContext>();
  std::vector<std::string> checkpointed_blocks_;
  double checksum_seconds_ = 0;
  bool autocast_bf16_ = false;  // CUDA with mixed_precision_param = "bfloat16"
  int64_t grad_accum_steps_ = 1;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  double flops_per_token_ = 0;
  double peak_flops_ = 0;
};

// "auto" -> cuda when available, else cpu. Throws ConfigError for "cuda" without CUDA.
c10::Device resolve_device(const std::string& name);

}  // namespace titan
