#include "metrics/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <system_error>

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEventFilePrefix = "events.out.tfevents.";

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Whether `name` is a YYYYmmdd-HHMM folder name.
bool is_minute_name(const std::string& name) {
  if (name.size() != 13 || name[8] != '-') return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i != 8 && (name[i] < '0' || name[i] > '9')) return false;
  }
  return true;
}

std::vector<std::string> event_files(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kEventFilePrefix, 0) == 0 && name.find(".tmp") == std::string::npos)
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The unix time an event file's name carries (0 when it has none).
int64_t name_time(const std::string& name) {
  const std::string rest = name.substr(std::string(kEventFilePrefix).size());
  char* end = nullptr;
  const long long t = std::strtoll(rest.c_str(), &end, 10);
  return end == rest.c_str() ? 0 : t;
}

// Keeps an old event file's records of steps up to `last_step`; removes the file when no
// summary record is left and nothing in it was damaged. A damaged record is left out and named in
// `warnings`, with what could not be framed after it. Returns the unix time its name carries.
int64_t trim_event_file(const std::string& path, int64_t last_step,
                        std::vector<std::string>& warnings) {
  check_output_target(path);
  std::string contents;
  try {
    contents = read_file(path, kMaxLogFileBytes);
  } catch (const std::system_error& e) {
    throw RuntimeFailure("cannot read " + path + ": " + e.code().message());
  }
  const EventRecords old = read_event_records(contents);
  for (const size_t offset : old.damaged) {
    warnings.push_back(fmt::format(
        "{}: the record at byte {} fails its CRC: left out, the records around it are kept", path,
        offset));
  }
  if (!old.complete) {
    warnings.push_back(
        fmt::format("{}: bytes {} to {} cannot be read as records (cut short or "
                    "damaged): left out, the records before them are kept",
                    path, old.end, contents.size()));
  }
  std::string kept;
  size_t summaries = 0;
  for (const EventRecord& r : old.records) {
    if (r.step > last_step) continue;
    kept += r.framed;
    if (r.step > 0) ++summaries;
  }
  if (summaries == 0 && old.damaged.empty() && old.complete) {
    std::remove(path.c_str());
  } else if (kept.size() != contents.size()) {
    write_file_atomically(path, kept);
  }
  return name_time(fs::path(path).filename().string());
}

std::string new_event_file(const std::string& folder, int64_t resume_step,
                           std::vector<std::string>& warnings) {
  int64_t newest = 0;
  for (const std::string& name : event_files(folder))
    newest = std::max(newest, trim_event_file(folder + "/" + name, resume_step, warnings));
  const auto now = static_cast<int64_t>(wall_time());
  return fmt::format("{}/{}{:010}.{}", folder, kEventFilePrefix, std::max(now, newest + 1),
                     host_name());
}

// The real folders (not links) in `folder` whose names `wanted` accepts.
std::vector<std::string> subfolders(const std::string& folder,
                                    const std::function<bool(const std::string&)>& wanted) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (wanted(name) && it->is_directory(type_ec) && !it->is_symlink(type_ec))
      out.push_back(folder + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_rank_folder_name(const std::string& name) {
  return name.rfind("rank_", 0) == 0 && name.size() > 5 &&
         name.find_first_not_of("0123456789", 5) == std::string::npos;
}

}  // namespace

std::vector<std::string> cut_tensorboard_history(const std::string& tb_root, int64_t resume_step) {
  std::vector<std::string> warnings;
  for (const std::string& run : subfolders(tb_root, is_minute_name)) {
    std::vector<std::string> folders{run};
    for (const std::string& rank : subfolders(run, is_rank_folder_name)) folders.push_back(rank);
    for (const std::string& folder : folders) {
      for (const std::string& name : event_files(folder))
        trim_event_file(folder + "/" + name, resume_step, warnings);
    }
  }
  return warnings;
}

std::string current_minute() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M", &local);
  return text;
}

bool rank_writes_tensorboard(const MetricsConfig& metrics, int64_t rank) {
  return metrics.enable_tensorboard && (rank == 0 || metrics.save_for_all_ranks);
}

std::string choose_tensorboard_run_folder(const std::string& tb_root, int64_t resume_step,
                                          const std::string& now_minute) {
  if (resume_step == 0) return tb_root + "/" + now_minute;
  std::string newest;
  std::error_code ec;
  for (fs::directory_iterator it(tb_root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_minute_name(name) && it->is_directory(ec) && !it->is_symlink(ec))
      newest = std::max(newest, name);
  }
  return tb_root + "/" + (newest.empty() ? now_minute : newest);
}

TensorBoardWriter::TensorBoardWriter(const std::string& folder, int64_t resume_step)
    : file_((make_output_folder(folder, FolderLink::kRefuse),
             new_event_file(folder, resume_step, warnings_)),
            LineFile::Mode::kTruncate) {
  file_.append(frame_record(encode_file_version_event(wall_time())));
}

void TensorBoardWriter::write(int64_t step, const std::vector<SummaryValue>& values) {
  file_.append(frame_record(encode_summary_event(wall_time(), step, values)));
}

}  // namespace titan
