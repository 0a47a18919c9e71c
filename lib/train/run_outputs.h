// The run's outputs: its console and the files it writes into its run folder
// (config/run_folder.h: config.toml, metrics.jsonl, fingerprint.log, numerics.log, TensorBoard's
// event files, and the instruments' folders), opened together and last, once the model, data,
// optimizer and resume point they describe are built, so that a run that fails to start leaves an
// earlier run's files untouched.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "instruments/instrument.h"
#include "instruments/numerics_trace.h"
#include "instruments/validation.h"
#include "metrics/fingerprint.h"
#include "metrics/metrics.h"
#include "metrics/tensorboard.h"
#include "step/step.h"
#include "train/run_context.h"
#include "util/run_lock.h"
#include "util/stopwatch.h"

namespace titan {

class RunOutputs {
 public:
  // Rank 0 creates the dump folder and locks it (a second run into it is refused: ConfigError,
  // on every rank). With checkpoint.enable it makes the checkpoint folder (a link in its path
  // inside the dump folder is refused now, not at the first save) and locks an absolute one,
  // which runs with different dump folders could otherwise share. Then, in this order: with
  // metrics.enable_tensorboard, rank 0 (every rank with save_for_all_ranks) opens a new event file
  // (see TensorBoardWriter) in the run folder rank 0 chose (choose_tensorboard_run_folder); each
  // instrument opens its outputs; rank 0 writes config.toml and opens metrics.jsonl; every rank
  // opens its fingerprint.log (fingerprint.rank<N>.log) with `header`; without a numerics.log
  // (the numerics trace opens its own) a stale one is removed (remove_stale_numerics_log). A run
  // resumed after `resume_step` > 0 keeps the files' lines up to it; otherwise they are replaced.
  // Throws RuntimeFailure when a file cannot be written. Requires: `context` outlives the outputs.
  // The lock is held until destruction.
  RunOutputs(const RunContext& context, const FingerprintHeader& header,
             const std::vector<std::shared_ptr<Instrument>>& instruments, int64_t resume_step);

  // This rank's console (silent for ranks LOG_RANK leaves out).
  std::ostream& console() const { return *context_.log; }
  // torchtitan's colours when the console is a terminal and metrics.disable_color_printing is
  // false; none otherwise.
  const ConsoleColors& colors() const;

  // A logged step: the console line, then metrics.jsonl's (rank 0) and its TensorBoard scalars
  // (torchtitan's tags, and layers/<part>/<norm> for the per-layer norms). When the console fails
  // (a closed pipe, a full disk) it warns once on the run's error stream
  // (stderr) and training goes on.
  void log_step(const StepMetrics& metrics);

  // A validation after step `step`: torchtitan's console line, a metrics.jsonl line
  // ({"step": N, "validation_loss": ...}) and TensorBoard's validation_metrics/ scalars.
  void log_validation(int64_t step, const Validated& validation);

  // A step's histograms (instruments/layer_norms.h), to TensorBoard when it is on; none: nothing.
  void write_histograms(int64_t step, const std::vector<SummaryValue>& histograms);

  // Every step's fingerprint.log line (see FingerprintLog::write_step).
  void write_fingerprint(int64_t step, double loss, double grad_norm, double lr,
                         int64_t tokens_seen, std::optional<uint64_t> params_checksum);

  // The outputs' own lines for the end-of-run log (TensorBoard's cost), `run_seconds` long.
  std::vector<std::string> cost_lines(double run_seconds) const;

 private:
  void check_console();
  void write_tensorboard(int64_t step, const std::vector<SummaryValue>& values);

  const RunContext& context_;
  std::unique_ptr<RunLock> lock_;             // rank 0
  std::unique_ptr<RunLock> checkpoint_lock_;  // rank 0, for an absolute checkpoint.folder
  std::unique_ptr<JsonlWriter> metrics_;      // rank 0
  std::unique_ptr<FingerprintLog> fingerprint_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  CostMeter tensorboard_cost_;  // records encoded and written
  bool console_failed_ = false;
};

}  // namespace titan
