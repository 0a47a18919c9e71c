// Checkpoint folders on disk: <folder>/step-N/ holds
//   model.safetensors      the parameters under torchtitan's names
//   optimizer.safetensors  AdamW's per-parameter state; steps and hyperparameters in its metadata
//   train_state.bin        the TrainState (encode_train_state)
//   config.toml            the resolved config of the run that saved it
//   manifest.txt           written last: format, step, kind, config hash, and each file's size
//                          and checksum (hash_bytes)
// A model-only checkpoint (the final save with checkpoint.last_save_model_only) has
// model.safetensors, config.toml and manifest.txt only. A sharded one (FSDP) has
// model.shard<P>.safetensors and optimizer.shard<P>.safetensors, one pair for each rank P of a
// shard group (sharded_checkpoint.h), instead of model.safetensors and optimizer.safetensors, and
// its manifest records the mesh; it loads whole, as the others do.
//
// Contract: a step-N/ folder is complete or absent. It is written as .step-N.tmp/ (every file
// fsynced, the manifest last), renamed into place, and the rename flushed; a kill at any moment
// leaves at worst a .step-N.tmp/ folder, which the next save removes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/train_state.h"

namespace titan {

struct CheckpointContents {
  int64_t step = 0;
  bool model_only = false;
  uint64_t config_hash = 0;
  std::string config_toml;
  std::vector<NamedTensor> model;
  // Full checkpoints only:
  std::vector<NamedTensor> optimizer;
  SafetensorsMetadata optimizer_metadata;
  TrainState state;  // rank 0's (train_state.bin), or on load the loading rank's
  // Data parallelism: the ranks that saved it, and ranks 1..world_size-1's own states (RNG and
  // loader position), in train_state.rank<N>.bin. Parameters and optimizer are replicated.
  int64_t world_size = 1;
  std::vector<TrainState> other_rank_states;
  // Saved by a batch-invariant run: every rank's loader position is the one global position, so
  // any number of ranks may resume it ("data_order global" in the manifest).
  bool global_data_order = false;
  // FSDP's mesh ("mesh replicate R shard S" in the manifest): the model and optimizer files are
  // the shard group's, written by its ranks (write_checkpoint_shard). 0: written whole.
  int64_t shards = 0;
  int64_t replicas = 1;
  // On load: the file the optimizer metadata came from, for errors, and which rows of each
  // optimizer tensor were kept (all unless load_checkpoint was given a RowShare).
  std::string optimizer_file = "optimizer.safetensors";
  RowShare optimizer_rows;
  // On load: which rows of each model tensor were kept (all unless load_checkpoint was given
  // model rows), each one's whole row count in c.model's order, and a checksum of the files the
  // manifest lists (their checksums): ranks that read the same checkpoint have the same one.
  RowShare model_rows;
  std::vector<int64_t> model_total_rows;
  uint64_t files_checksum = 0;
};

// Tensors shaped as c.model's whole tensors (c.model_total_rows rows), holding no memory: for
// checking them against a model's parameters. Nothing may read them.
std::vector<NamedTensor> whole_model_shapes(const CheckpointContents& c);

struct SaveRecord {
  std::string path;    // the step-N folder
  uint64_t bytes = 0;  // all files together
  double seconds = 0;  // from the first byte to the flushed rename
};

// "step-N" (the folder's name for step N).
std::string checkpoint_folder_name(int64_t step);

// <step_folder>/manifest.txt: the file that lists (size and checksum) every other file of a
// checkpoint; load_checkpoint checks each against it.
std::string checkpoint_manifest_path(const std::string& step_folder);

// N for a folder named exactly checkpoint_folder_name(N), else -1 ("step-07" is not step 7).
int64_t step_of_folder_name(const std::string& name);

// Writes `contents` as <folder>/step-<step>/, creating `folder`, after removing stale .step-*.tmp
// folders. A step-N/ already there is replaced only after the new one is complete. `should_abort`
// is polled between pieces of the files: when it returns true the temporary folder is removed
// and WriteAborted is thrown, leaving every complete checkpoint untouched. Throws RuntimeFailure
// for I/O errors (the temporary folder removed as well).
SaveRecord save_checkpoint(const std::string& folder, const CheckpointContents& contents,
                           const std::function<bool()>& should_abort = {});

// The same in three parts, for a save whose shard files other ranks write between them:
// begin_checkpoint_write makes `folder` and the empty checkpoint_temp_folder (stale ones removed);
// finish_checkpoint_write writes the rest of `contents` there (the model and optimizer files
// unless contents.shards, whose files are `shard_files`), the manifest listing them all, and
// renames it into place (it removes the temporary folder when it throws);
// abandon_checkpoint_write removes the temporary folder. save_checkpoint's contract holds.
std::string checkpoint_temp_folder(const std::string& folder, int64_t step);
void begin_checkpoint_write(const std::string& folder, int64_t step);
SaveRecord finish_checkpoint_write(const std::string& folder, const CheckpointContents& contents,
                                   const std::vector<CheckpointFile>& shard_files,
                                   const std::function<bool()>& should_abort = {});
void abandon_checkpoint_write(const std::string& folder, int64_t step);

// The checkpoints under a folder. A folder counts as step N only when its name is exactly
// checkpoint_folder_name(N) ("step-N", no leading zeros), it holds a manifest, and the step in its
// manifest (and, for a full checkpoint, in train_state.bin) is N, or it is a final save in
// Hugging Face's layout (is_hf_checkpoint_folder: no manifest, written whole); any other step-like
// folder is skipped and named in `warnings` with what it holds, never silently (a backup copy
// renamed step-100 must not pass for the latest).
struct CheckpointListing {
  std::vector<int64_t> steps;         // ascending; empty when the folder does not exist
  std::vector<std::string> warnings;  // one line per folder skipped
  // The skipped entries named step-N (not checkpoints, yet where a save of step N would go).
  std::vector<int64_t> skipped_steps;
};
CheckpointListing list_checkpoints(const std::string& folder);

// The step-N folder that `path` names: `path` itself when it holds a manifest, else the latest
// checkpoint of list_checkpoints(path) (its warnings appended to `warnings`). Throws ConfigError
// naming `path` when it is neither.
std::string resolve_step_folder(const std::string& path, std::vector<std::string>& warnings);

// Deletes all but the `keep` latest checkpoints (keep 0: none deleted). Returns the steps
// deleted. Requires: called after a save completed, so the latest is complete.
std::vector<int64_t> prune_checkpoints(const std::string& folder, int64_t keep);

// Reads <step_folder>, checking the manifest first: every listed file present, with its size and
// checksum. A sharded checkpoint's files are assembled into whole tensors (RowAssembler). Throws
// RuntimeFailure naming the damaged or missing file, with a hint to load another step
// (checkpoint.load_step). Modifies nothing. `rank` selects the TrainState read into `state` (rank
// 0: train_state.bin); a rank the checkpoint has no state for leaves `state` default (the caller
// refuses a world_size change). `rows`: the rows of each model and optimizer tensor kept (an
// FSDP rank's: the whole weights and moments are never built from shard files, which are read
// one at a time); the default keeps them all.
CheckpointContents load_checkpoint(const std::string& step_folder, int64_t rank = 0,
                                   RowShare rows = {});

}  // namespace titan
