#include "config/run_folder.h"

#include <filesystem>
#include <stdexcept>
#include <utility>

namespace titan {

const char* run_file_name(RunFile file) {
  switch (file) {
    case RunFile::kConfig:
      return "config.toml";
    case RunFile::kMetrics:
      return "metrics.jsonl";
    case RunFile::kFingerprint:
      return "fingerprint.log";
    case RunFile::kNumerics:
      return "numerics.log";
    case RunFile::kLock:
      return ".titan-train.lock";
  }
  throw std::logic_error("unhandled RunFile");
}

std::optional<int64_t> rank_of_copy(RunFile file, const std::string& name) {
  const std::string base = run_file_name(file);
  if (name == base) return 0;
  const size_t dot = base.rfind('.');
  const std::string stem = base.substr(0, dot) + ".rank", extension = base.substr(dot);
  if (name.size() <= stem.size() + extension.size() || name.compare(0, stem.size(), stem) != 0 ||
      name.compare(name.size() - extension.size(), extension.size(), extension) != 0) {
    return std::nullopt;
  }
  const std::string digits = name.substr(stem.size(), name.size() - stem.size() - extension.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits[0] == '0') {
    return std::nullopt;
  }
  return std::stoll(digits);
}

RunFolder::RunFolder(const Config& config)
    : path_(config.job.dump_folder),
      tensorboard_(config.metrics.save_tb_folder),
      checkpoint_(config.checkpoint.folder),
      profile_traces_(config.profiling.save_traces_folder),
      memory_snapshots_(config.profiling.save_memory_snapshot_folder),
      comm_traces_(config.comm.save_traces_folder),
      config_json_(config.job.save_config_file) {}

RunFolder::RunFolder(std::string dump_folder) : path_(std::move(dump_folder)) {}

std::string RunFolder::file(RunFile file, int64_t rank) const {
  return path_ + "/" + rank_file_name(run_file_name(file), rank);
}

std::string RunFolder::subfolder(RunSubfolder folder) const {
  switch (folder) {
    case RunSubfolder::kCheckpoint:
      return std::filesystem::path(checkpoint_).is_absolute() ? checkpoint_
                                                              : path_ + "/" + checkpoint_;
    case RunSubfolder::kTensorBoard:
      return path_ + "/" + tensorboard_;
    case RunSubfolder::kRerun:
      return path_ + "/rerun";
    case RunSubfolder::kPrecision:
      return path_ + "/precision";
    case RunSubfolder::kCapture:
      return path_ + "/capture";
    case RunSubfolder::kAcDebug:
      return path_ + "/ac_debug";
    case RunSubfolder::kProfileTraces:
      return path_ + "/" + profile_traces_;
    case RunSubfolder::kMemorySnapshots:
      return path_ + "/" + memory_snapshots_;
    case RunSubfolder::kCommTraces:
      return path_ + "/" + comm_traces_;
  }
  throw std::logic_error("unhandled RunSubfolder");
}

FolderLink RunFolder::link_policy(RunSubfolder folder) const {
  const bool users_own =
      folder == RunSubfolder::kCheckpoint && std::filesystem::path(checkpoint_).is_absolute();
  return users_own ? FolderLink::kFollow : FolderLink::kRefuse;
}

std::string RunFolder::make(RunSubfolder folder) const {
  const std::string path = subfolder(folder);
  if (link_policy(folder) == FolderLink::kFollow) {
    make_output_folder(path, FolderLink::kFollow);
    return path;
  }
  // Inside the dump folder every component is titan-train's: none may be a link.
  return make_output_folder_below(path_, path.substr(path_.size() + 1));
}

std::string RunFolder::own_use_of(const std::string& name) const {
  const std::string normal = std::filesystem::path(name).lexically_normal().string();
  const std::pair<RunFile, const char*> files[] = {{RunFile::kConfig, "resolved config"},
                                                   {RunFile::kMetrics, "metrics"},
                                                   {RunFile::kFingerprint, "fingerprint"},
                                                   {RunFile::kNumerics, "numerics trace"},
                                                   {RunFile::kLock, "lock"}};
  for (const auto& [file, what] : files) {
    if (rank_of_copy(file, normal)) return std::string("its ") + what + " file " + normal;
  }
  const std::pair<RunSubfolder, const char*> folders[] = {
      {RunSubfolder::kCheckpoint, "checkpoint"},
      {RunSubfolder::kTensorBoard, "TensorBoard"},
      {RunSubfolder::kRerun, "rerun report"},
      {RunSubfolder::kPrecision, "precision report"},
      {RunSubfolder::kCapture, "capture"},
      {RunSubfolder::kAcDebug, "recompute trace"},
      {RunSubfolder::kProfileTraces, "profiler trace"},
      {RunSubfolder::kMemorySnapshots, "memory snapshot"},
      {RunSubfolder::kCommTraces, "flight recorder"}};
  for (const auto& [folder, what] : folders) {
    const std::string path = subfolder(folder);
    if (path.compare(0, path_.size() + 1, path_ + "/") != 0) continue;  // outside (absolute)
    const std::string relative =
        std::filesystem::path(path.substr(path_.size() + 1)).lexically_normal().string();
    if (normal == relative || normal.compare(0, relative.size() + 1, relative + "/") == 0) {
      return std::string("its ") + what + " folder " + relative;
    }
  }
  return "";
}

std::string RunFolder::report(RunSubfolder folder, const std::string& name, int64_t rank) const {
  return subfolder(folder) + "/" + rank_file_name(name, rank);
}

}  // namespace titan
