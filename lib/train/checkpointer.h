// Checkpointing a run: which checkpoint (or initial weights) it starts from, when it saves, the
// final model-only save, and what a SIGTERM or SIGINT does (lib/util/stop_signal.h). The folder
// format is lib/checkpoint's.
#pragma once

#include <torch/optim/adamw.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "config/run_folder.h"
#include "data/step_batches.h"
#include "distributed/process_group.h"
#include "model/model.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace titan {

// Where a run starts.
struct StartPoint {
  int64_t step = 0;                 // the step it resumes after (0: a fresh run)
  std::optional<TrainState> state;  // a full checkpoint's: the run applies it
  std::vector<std::string> notes;   // what was loaded, for the start-up log
  // The step the LR schedule counts from (checkpoint.exclude_from_loading holds "lr_scheduler":
  // it starts again at the resumed step, as torchtitan's fresh scheduler does).
  int64_t schedule_origin = 0;
  // When the layout keeps some rows only: this rank's rows of each parameter's AdamW state, in the
  // model's order, for FullyShardedModel::take_optimizer_rows (the whole optimizer gets none);
  // empty when none was loaded.
  std::vector<std::optional<AdamWParamSnapshot>> optimizer_rows;
};

class Checkpointer {
 public:
  // Loads and saves as `layout` (the run's DataParallel's) says: loaded weights go through
  // layout.load (checked against the model's shapes first), keeping layout.rows of the weights
  // and of the optimizer state (StartPoint::optimizer_rows), so that an FSDP rank builds neither
  // the whole weights nor the whole moments; full saves write as layout.saves says. Requires:
  // `group`, `model`, `optimizer` and `batches` (whose data position it checks before a resume)
  // outlive the checkpointer.
  Checkpointer(const Config& config, ProcessGroup& group, Model& model,
               torch::optim::AdamW& optimizer, const StepBatches& batches, CheckpointLayout layout);

  // With checkpoint.enable, loads the latest complete checkpoint (rank 0's listing decides for
  // every rank), or checkpoint.load_step, into the model and optimizer, less the parts
  // checkpoint.exclude_from_loading names (a step-0 model-only checkpoint is a seed: its weights
  // at step 0); else checkpoint.initial_load_path when set (weights only, or with
  // initial_load_model_only = false a checkpoint's whole state). Nothing with
  // create_seed_checkpoint. A damaged checkpoint is RuntimeFailure, one that does not fit the
  // config ConfigError. Writes nothing. (checkpoint_resume.cpp)
  StartPoint resume_or_initialize();

  // What resume_or_initialize loaded weights from, as a checksum: of the checkpoint's files (its
  // manifest's checksums), of the tensors of a .safetensors file, or of a Hugging Face folder's
  // tensors (its files' headers where each rank reads only its rows); 0 when it loaded none. Ranks
  // that keep only their rows of the weights compare it to know they read the same ones.
  uint64_t loaded_checksum() const { return loaded_checksum_; }
  // Whether step `step` ends with a save (every checkpoint.interval steps, at the last, and at
  // step 1 with enable_first_step_checkpoint; never with load_only).
  bool due(int64_t step) const;
  // Refuses (ConfigError, before any output) a run that would save a step after `start_step`
  // onto a step-N the checkpoint listing skipped (a save replaces only checkpoints), or whose
  // final Hugging Face save (last_save_in_hf) would meet a step-N it does not replace.
  void refuse_saves_onto_skipped(int64_t start_step) const;

  // checkpoint.create_seed_checkpoint: saves the initial weights as step-0, as the final save
  // does (last_save_model_only, export_dtype).
  void save_seed(const TrainState& state, std::ostream& console);

  // Saves `state`'s step: a full checkpoint, or (the final save with last_save_model_only) the
  // model alone in export_dtype. With several ranks every rank calls it (rank 0 writes, with
  // each rank's TrainState; under FSDP each shard's rank its shard). A second stop signal that
  // arrives during the write aborts it: StoppedBySignal.
  void save(const TrainState& state, bool final_save, std::ostream& console);

  // After SIGTERM or SIGINT reached any rank (the ranks agree, so they stop at the same step):
  // with checkpoints, saves step `step` unless it is saved already and returns true; without,
  // throws StoppedBySignal. False when no signal arrived. `state` reads the current TrainState.
  bool stop_requested(int64_t step, const std::function<TrainState()>& state,
                      std::ostream& console);

 private:
  void save_whole(const TrainState& state, bool final_save, std::ostream& console);
  // A full save under FSDP: every shard writer its files, rank 0 the rest and the manifest
  // (collective; a failure or abort on any rank abandons it on all). checkpoint_save_sharded.cpp
  void save_sharded(const TrainState& state, std::ostream& console);
  // Rank 0's part of save_sharded once the writers reported: "" when saved, else why not.
  std::string finish_sharded_save(const TrainState& state, const std::vector<std::string>& states,
                                  const std::vector<std::string>& outcomes,
                                  SteadyClock::time_point start,
                                  const std::function<bool()>& should_abort, std::ostream& console);
  // A save's abort check: true once a stop signal arrived after this call and at least two
  // arrived in all (the first asked for the save; a launcher such as `timeout` may deliver one
  // signal twice, before the save starts).
  static std::function<bool()> abort_on_second_signal();
  // The StoppedBySignal for a save of step `step` aborted by a second stop signal on `where`.
  StoppedBySignal aborted_save(int64_t step, const std::string& where) const;
  // Saved: keeps the checkpoint.keep_latest_k latest (rank 0) and says so on the console.
  void report_saved(const SaveRecord& record, const std::string& kind, std::ostream& console);
  void resume_from(const std::string& path, StartPoint& start);
  // Restores a full checkpoint's model, optimizer and train state, each unless excluded.
  void restore_parts(const CheckpointContents& c, const std::string& path, StartPoint& start);
  void load_initial_weights(const std::string& path, StartPoint& start);
  // checkpoint.initial_load_in_hf: the Hugging Face checkpoint at `path` (hf_checkpoint.h).
  void load_initial_hf_weights(const std::string& path, StartPoint& start);
  // A step-N folder written by last_save_in_hf: the run is over (step N reached) or refused.
  void resume_from_hf_final_save(const std::string& path, StartPoint& start);
  // Writes the final model in Hugging Face's layout as step-N (last_save_in_hf).
  SaveRecord save_hf(int64_t step);
  // As layout_.load says: `tensors` (the rows c.model_rows keeps of them, from `c` when given),
  // loaded from what `checksum` identifies.
  // `kept`: the rows of each tensor it holds (total_rows: each whole tensor's first dimension).
  void load_model(const std::vector<NamedTensor>& tensors, uint64_t checksum, RowShare kept = {},
                  const std::vector<int64_t>& total_rows = {});
  void load_model(const CheckpointContents& c);
  // The Hugging Face checkpoint at `path`, this rank's rows (layout_.rows), loaded into the model.
  void load_hf_rows(const std::string& path, HfLoadReport& report);
  at::ScalarType parameter_dtype() const;
  // Whether checkpoint.exclude_from_loading names `part`.
  bool excluded(const std::string& part) const;
  // Whether this run writes checkpoints (checkpoint.enable without load_only).
  bool saves() const;

  const Config& config_;
  ProcessGroup& group_;
  Model& model_;
  torch::optim::AdamW& optimizer_;
  const StepBatches& batches_;
  RunFolder run_folder_;
  std::string folder_;            // <dump_folder>/<checkpoint.folder>
  int64_t last_saved_step_ = -1;  // this run's latest checkpoint
  int64_t exchanges_ = 0;         // store exchanges of this run, for their unique keys
  CheckpointLayout layout_;
  uint64_t loaded_checksum_ = 0;
};

}  // namespace titan
