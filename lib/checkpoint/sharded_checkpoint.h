// The files of a sharded checkpoint (FSDP): each rank of one shard group writes its rows of every
// parameter and of their AdamW state, so that no rank ever holds the whole model to save it.
//
//   model.shard<P>.safetensors      rank P's real rows (padding left out) of each parameter
//   optimizer.shard<P>.safetensors  the same rows of "<name>.exp_avg", "<name>.exp_avg_sq" (and
//                                   amsgrad's "<name>.max_exp_avg_sq"), with the optimizer
//                                   metadata a whole checkpoint's optimizer.safetensors has
//
// Each tensor's place is in its file's metadata, "rows.<tensor>" = "<first row> <total rows>",
// so that reading does not depend on how the rows were split: a checkpoint saved at one shard
// degree loads at any other, on replication and on one process. The manifest lists every file
// with its checksum and records the mesh ("mesh replicate R shard S", checkpoint_io.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "distributed/shard_layout.h"

namespace titan {

// A file of a checkpoint folder as the manifest lists it.
struct CheckpointFile {
  std::string name;
  uint64_t size = 0;
  uint64_t checksum = 0;  // hash_bytes of the contents
};

// One rank's rows [begin, begin + rows.size(0)) of a tensor of `total` rows.
struct RowsPiece {
  std::string name;
  at::Tensor rows;  // (rows, ...) on the CPU or any device; copied to write
  int64_t begin = 0;
  int64_t total = 0;
};

// What one rank of a shard group saves.
struct CheckpointShard {
  int64_t position = 0;  // the rank in the shard group: the file names' P
  int64_t shards = 1;    // the shard group's size
  std::vector<RowsPiece> model;
  std::vector<RowsPiece> optimizer;        // empty before the first step
  SafetensorsMetadata optimizer_metadata;  // as full_checkpoint's (format, groups, steps)
};

// How a run's full checkpoints save under FSDP. A full save writes each rank's rows (`shard`
// gives them) as shard files from the ranks where `writes` (one replica's under HSDP), the mesh
// (`replicas` x `shards`) in the manifest; `gather` makes the model whole for a model-only save
// and `release` shards it again (both collective). Without `shard`, rank 0 saves the whole model.
struct ShardedSaves {
  std::function<CheckpointShard()> shard;
  bool writes = false;
  int64_t shards = 0;
  int64_t replicas = 1;
  std::function<void()> gather, release;
};

// "model.shard3.safetensors" for part "model" and position 3.
std::string shard_file_name(const std::string& part, int64_t position);

// Writes `shard`'s two files into `folder` (a checkpoint's temporary folder), pieces without rows
// left out. `should_abort` as HashedFileWriter's. Returns the files written, for the manifest.
// Throws RuntimeFailure (I/O) or WriteAborted; a file left unfinished is removed.
std::vector<CheckpointFile> write_checkpoint_shard(const std::string& folder,
                                                   const CheckpointShard& shard,
                                                   const std::function<bool()>& should_abort);

// Which rows of each tensor a load keeps: all (shards 0), or rank `position`'s of `shards` as
// FSDP splits them (fsdp_rows), for an FSDP run that loads only the rows it holds.
struct RowShare {
  int64_t position = 0;
  int64_t shards = 0;
  RowRange rows_of(int64_t total) const;
};

// Where the weights a load reads go: rows [first_row, first_row + rows.size(0)) of the model's
// parameter `name`.
using ModelLoad =
    std::function<void(const std::string& name, int64_t first_row, const at::Tensor& rows)>;

// How a run's ranks hold what its checkpoints load and save (DataParallel::checkpoint_layout).
struct CheckpointLayout {
  ModelLoad load;      // null: into the model's parameters, whole
  RowShare rows;       // the rows of the weights and AdamW moments a load keeps (all by default)
  ShardedSaves saves;  // what a full save writes on this rank (rank 0 the whole model by default)
};

// Builds whole tensors (or the rows `keep` chooses of them) from the shard files of one part,
// one file at a time.
class RowAssembler {
 public:
  // `budget_bytes`: the most the tensors built may take together (the shard files' sizes: an
  // altered "rows" entry cannot make the loader allocate more than the files hold).
  explicit RowAssembler(uint64_t budget_bytes, RowShare keep = {})
      : budget_bytes_(budget_bytes), keep_(keep) {}

  // Copies each of `part`'s tensors into its rows of the whole tensor. Throws RuntimeFailure
  // naming `source` for a tensor without its "rows" entry, rows outside the tensor or given
  // twice, or a dtype or row shape that differs from another file's.
  void add(const SafetensorsContents& part, const std::string& source);

  // Whether any of `part`'s tensors holds rows this assembler keeps (checked as add checks the
  // "rows" entries). A part that holds none can be added as its header's shapes alone
  // (shape_only tensors): add copies nothing from it.
  bool holds_kept_rows(const SafetensorsContents& part, const std::string& source);

  // The tensors (their kept rows), in the order first added, and in `total_rows` (when given)
  // each one's whole row count. Throws RuntimeFailure naming `what` and the first tensor some of
  // whose kept rows no file held.
  std::vector<NamedTensor> finish(const std::string& what,
                                  std::vector<int64_t>* total_rows = nullptr);

 private:
  struct Whole {
    at::Tensor tensor;                  // the kept rows
    int64_t total = 0;                  // the whole tensor's rows
    RowRange kept;                      // which
    std::map<int64_t, int64_t> pieces;  // begin -> end of the rows the files gave
  };
  uint64_t budget_bytes_;
  RowShare keep_;
  uint64_t allocated_bytes_ = 0;
  std::vector<std::string> order_;
  std::map<std::string, Whole> wholes_;
};

// A rank's outcome of its part of a save, to send to rank 0: the files it wrote, or why not.
struct ShardWriteOutcome {
  enum class Status { kWritten, kAborted, kFailed } status = Status::kWritten;
  std::string message;  // kFailed: the error
  std::vector<CheckpointFile> files;
};
std::string encode_shard_outcome(const ShardWriteOutcome& outcome);
// Throws RuntimeFailure naming `source` for text encode_shard_outcome did not write.
ShardWriteOutcome decode_shard_outcome(const std::string& text, const std::string& source);

}  // namespace titan
