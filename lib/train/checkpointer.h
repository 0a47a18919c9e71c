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
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "config/run_folder.h"
#include "data/step_batches.h"
#include "distributed/process_group.h"
#include "model/llama.h"

namespace titan {

// Where a run starts.
struct StartPoint {
  int64_t step = 0;                 // the step it resumes after (0: a fresh run)
  std::optional<TrainState> state;  // a full checkpoint's: the run applies it
  std::vector<std::string> notes;   // what was loaded, for the start-up log
  // The step the LR schedule counts from (checkpoint.exclude_from_loading holds "lr_scheduler":
  // it starts again at the resumed step, as torchtitan's fresh scheduler does).
  int64_t schedule_origin = 0;
};

class Checkpointer {
 public:
  // Requires: `group`, `model`, `optimizer` and `batches` (whose data position it checks before
  // a resume) outlive the checkpointer.
  Checkpointer(const Config& config, ProcessGroup& group, Transformer& model,
               torch::optim::AdamW& optimizer, const StepBatches& batches);

  // With checkpoint.enable, loads the latest complete checkpoint (rank 0's listing decides for
  // every rank), or checkpoint.load_step, into the model and optimizer, less the parts
  // checkpoint.exclude_from_loading names (a step-0 model-only checkpoint is a seed: its weights
  // at step 0); else checkpoint.initial_load_path when set (weights only, or with
  // initial_load_model_only = false a checkpoint's whole state). Nothing with
  // create_seed_checkpoint. A damaged checkpoint is RuntimeFailure, one that does not fit the
  // config ConfigError. Writes nothing. (checkpoint_resume.cpp)
  StartPoint resume_or_initialize();

  // FSDP: `gather` makes the model and optimizer whole before a save and `release` shards them
  // again after (both collective); unset, they are whole already.
  void set_whole_model(std::function<void()> gather, std::function<void()> release) {
    gather_whole_ = std::move(gather);
    release_whole_ = std::move(release);
  }

  // Whether step `step` ends with a save (every checkpoint.interval steps, at the last, and at
  // step 1 with enable_first_step_checkpoint; never with load_only).
  bool due(int64_t step) const;

  // checkpoint.create_seed_checkpoint: saves the initial weights as step-0, as the final save
  // does (last_save_model_only, export_dtype).
  void save_seed(const TrainState& state, std::ostream& console);

  // Saves `state`'s step: a full checkpoint, or (the final save with last_save_model_only) the
  // model alone in export_dtype. With several ranks every rank calls it (rank 0 writes, with
  // each rank's TrainState). A second stop signal during the write aborts it: StoppedBySignal.
  void save(const TrainState& state, bool final_save, std::ostream& console);

  // After SIGTERM or SIGINT reached any rank (the ranks agree, so they stop at the same step):
  // with checkpoints, saves step `step` unless it is saved already and returns true; without,
  // throws StoppedBySignal. False when no signal arrived. `state` reads the current TrainState.
  bool stop_requested(int64_t step, const std::function<TrainState()>& state,
                      std::ostream& console);

 private:
  void save_whole(const TrainState& state, bool final_save, std::ostream& console);
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
  at::ScalarType parameter_dtype() const;
  // Whether checkpoint.exclude_from_loading names `part`.
  bool excluded(const std::string& part) const;
  // Whether this run writes checkpoints (checkpoint.enable without load_only).
  bool saves() const;

  const Config& config_;
  ProcessGroup& group_;
  Transformer& model_;
  torch::optim::AdamW& optimizer_;
  const StepBatches& batches_;
  RunFolder run_folder_;
  std::string folder_;            // <dump_folder>/<checkpoint.folder>
  int64_t last_saved_step_ = -1;  // this run's latest checkpoint
  int64_t exchanges_ = 0;         // store exchanges of this run, for their unique keys
  std::function<void()> gather_whole_, release_whole_;
};

}  // namespace titan
