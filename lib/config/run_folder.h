// The run folder (job.dump_folder) as one contract: the name of every output a run writes there,
// which ranks write which copy, and whether a symbolic link may stand in for a folder. The
// writers (lib/metrics, lib/instruments, lib/train), the checkpoint code and `compare` all take
// their paths from here, so that a name is spelled once.
//
//   config.toml                      rank 0: the resolved config (repeats the run)
//   metrics.jsonl                    rank 0: one JSON object per logged step
//   fingerprint.log                  every rank (fingerprint.rank<N>.log): the step bits
//   numerics.log                     every rank (numerics.rank<N>.log): debug.numerics_trace
//   .titan-train.lock                rank 0: the run's lock (flock), holding its PID
//   <checkpoint.folder>/step-<N>/    checkpoints (an absolute checkpoint.folder is used as given)
//   <metrics.save_tb_folder>/        TensorBoard event files
//   rerun/step<N>[.rank<R>].txt      rerun reports
//   precision/step<N>.{txt,json}     precision attribution reports
//   capture/step<N>/                 captured steps (debug.capture_steps), for titan-train replay
//   ac_debug/step<N>_<block>.txt     recompute checker traces (activation_checkpoint.debug)
//   <profiling.save_traces_folder>/iteration_<N>/rank<R>_trace.json   profiler traces
//   <profiling.save_memory_snapshot_folder>/iteration_<N>/...          CUDA memory snapshots
//   <comm.save_traces_folder>/<save_traces_file_prefix><R>            NCCL flight recorder dumps
//   <job.save_config_file>           rank 0: the resolved config as JSON, when named
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "util/files.h"

namespace titan {

// The files a run writes at the top of its folder.
enum class RunFile { kConfig, kMetrics, kFingerprint, kNumerics, kLock };

// The folders a run makes inside its folder (or, for an absolute checkpoint.folder, anywhere).
enum class RunSubfolder {
  kCheckpoint,
  kTensorBoard,
  kRerun,
  kPrecision,
  kCapture,
  kAcDebug,
  kProfileTraces,
  kMemorySnapshots,
  kCommTraces,
};

// Rank 0's name of `file` ("fingerprint.log"); rank_file_name gives another rank's.
const char* run_file_name(RunFile file);

// The rank whose copy of `file` is named `name` ("fingerprint.rank3.log": 3, "fingerprint.log":
// 0), or nullopt when `name` is no rank's copy of it.
std::optional<int64_t> rank_of_copy(RunFile file, const std::string& name);

class RunFolder {
 public:
  // The folder of a run whose config is `config`.
  explicit RunFolder(const Config& config);
  // A run folder read back from its path alone (compare): the subfolders take their defaults.
  explicit RunFolder(std::string dump_folder);

  const std::string& path() const { return path_; }

  // <dump_folder>/<name>, rank `rank`'s copy ("fingerprint.rank1.log").
  std::string file(RunFile file, int64_t rank = 0) const;

  // The subfolder's path. Checkpoints go to checkpoint.folder as given when absolute
  // (torchtitan's behaviour), else under job.dump_folder (validate() refuses a relative folder
  // that leaves it).
  std::string subfolder(RunSubfolder folder) const;
  // Whether its last component may be a symbolic link: the user's own folders (an absolute
  // checkpoint.folder) may; the folders titan-train makes inside the dump folder may not.
  FolderLink link_policy(RunSubfolder folder) const;
  // Creates the subfolder (and its parents) unless it exists, under its link policy (see
  // make_output_folder). Returns its path.
  std::string make(RunSubfolder folder) const;

  // job.save_config_file's path, or "" when none is named.
  std::string config_json() const { return config_json_.empty() ? "" : path_ + "/" + config_json_; }

  // What the run itself keeps at `name`, a path relative to the dump folder: "its lock
  // .titan-train.lock", "its checkpoint folder checkpoint", ...; "" when the run uses no such
  // path (another of the user's files may go there).
  std::string own_use_of(const std::string& name) const;

  // A report file in a subfolder: rank `rank`'s copy of `name` there.
  std::string report(RunSubfolder folder, const std::string& name, int64_t rank = 0) const;

 private:
  std::string path_;
  std::string tensorboard_ = "tb";
  std::string checkpoint_ = "checkpoint";
  std::string profile_traces_ = "profile_traces";
  std::string memory_snapshots_ = "memory_snapshot";
  std::string comm_traces_ = "comm_traces";
  std::string config_json_;
};

}  // namespace titan
