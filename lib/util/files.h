// Reading and writing whole files, and line-at-a-time logs that never hold a partial line.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "util/error.h"
#include "util/hash.h"

namespace titan {

// Every file titan-train reads or writes goes through this header, so that one set of rules
// holds: it reads regular files only, never blocks in open() (O_NONBLOCK: a FIFO or a device is
// opened, looked at and refused), and reads no more than a bound the caller states; it writes
// regular files only, never through a final symbolic link (O_NOFOLLOW), and replaces a file by
// renaming a new one over it, never by truncating it in place (a hard link's other name keeps
// its contents).

// A path that is not a regular file where titan-train needs one (a FIFO, a device, a folder, a
// symbolic link where it writes). Exit code 2; where() is the path, message() says what it is.
class FileRefused : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// "a FIFO (named pipe)", "a character device", "a symbolic link", ... for a stat st_mode.
std::string file_type_name(unsigned mode);

// Throws FileRefused for the input `path`, whose stat st_mode `mode` is not a regular file's.
[[noreturn]] void refuse_input(const std::string& path, unsigned mode);

// The whole contents of the regular file `path` (a link to one is followed), at most `max_bytes`
// of it. Throws FileRefused when `path` is not a regular file, std::system_error with EFBIG when
// it holds more than `max_bytes`, and std::system_error with the system's reason when it cannot
// be opened or read.
std::string read_file(const std::string& path, uint64_t max_bytes);

// Bounds for read_file, by what is read.
constexpr uint64_t kMaxTextFileBytes = uint64_t(4) << 20;  // configs, manifests, train states
constexpr uint64_t kMaxLogFileBytes = uint64_t(8) << 30;   // logs that compare reads

// Writes `contents` to `path` atomically: a new temporary file in the same folder, flushed to
// disk, then renamed over `path`. On failure the temporary file is removed and `path` is
// untouched. Throws FileRefused when `path` exists and is not a regular file, RuntimeFailure
// naming the path and the system's reason otherwise.
void write_file_atomically(const std::string& path, const std::string& contents);

// Throws FileRefused when `path` exists as anything but a regular file (a link is not followed).
void check_output_target(const std::string& path);

// Opens the output file `path` with `flags` (O_WRONLY or O_RDWR, O_CREAT, ...) and returns the
// descriptor; O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC are added. Throws FileRefused when `path` is
// a symbolic link or exists and is not a regular file, RuntimeFailure on other errors.
int open_output_file(const std::string& path, int flags);

// Whether the last component of a folder may be a symbolic link (followed). The dump folder and
// an absolute checkpoint.folder are the user's to point anywhere; the folders titan-train makes
// inside the dump folder (checkpoint/, rerun/, ac_debug/) are its own and must be real folders.
enum class FolderLink { kFollow, kRefuse };

// Creates the folder `path` (and its parents) unless it exists. Throws FileRefused when it
// exists as something else (or, with kRefuse, as a symbolic link), RuntimeFailure when it cannot
// be created.
void make_output_folder(const std::string& path, FolderLink link);

// Creates `root` (a link followed: the user's folder) and then each folder of `relative` below
// it, one component at a time. Throws FileRefused when any component below `root` exists as a
// symbolic link or anything but a folder (a link in the middle would carry the outputs out of
// `root`), RuntimeFailure when one cannot be created. Returns root/relative.
std::string make_output_folder_below(const std::string& root, const std::string& relative);

// A text file written whole lines at a time. Each write is one write(2) of complete lines; when a
// write fails (a full disk), the file is cut back to its last complete line before the error is
// thrown, so readers never see a partial line.
class LineFile {
 public:
  enum class Mode { kTruncate, kAppend };

  // kTruncate: a new, empty file replaces `path` (renamed over it); kAppend: `path` is opened
  // for appending (created when missing). Refuses what open_output_file refuses.
  LineFile(const std::string& path, Mode mode);
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;

  // Appends `lines` (one or more lines; a final '\n' is added when missing). Throws
  // RuntimeFailure naming the path and the reason.
  void write(const std::string& lines);
  // Appends `bytes` as they are, by the same rule: all of them or none (binary records).
  void append(const std::string& bytes);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  long long size_ = 0;  // bytes of complete lines written so far
};

// The step a line of a log starts, or -1 for a line that continues the step of the line before
// it. Each log format has its own rule (lib/metrics: fingerprint.log, numerics.log,
// metrics.jsonl).
using LineStepRule = std::function<int64_t(const std::string& line)>;

// The number right after `prefix` at the start of `line` ("step 12 ..." with "step "), or -1.
int64_t step_after_prefix(const std::string& line, const char* prefix);

// Prepares the line log `path` for a run that continues from step `last_step` (0: a fresh run):
// the file becomes `header` followed by the old file's lines of steps 1..last_step, as
// `step_of_line` assigns lines to steps (lines before the first step are the old header,
// replaced), written atomically; the run then appends to it (LineFile kAppend). An unterminated
// last line (a kill mid-write) is dropped. A missing file counts as empty.
void rewrite_log_through_step(const std::string& path, const std::string& header, int64_t last_step,
                              const LineStepRule& step_of_line);

// Flushes a folder's entries (a file renamed into it) to disk. Throws RuntimeFailure.
void fsync_folder(const std::string& path);

// The name rank `rank` of a multi-process run writes its copy of `name` under: `name` itself for
// rank 0 (a one-process run's name), "fingerprint.rank1.log" for rank 1 of "fingerprint.log".
std::string rank_file_name(const std::string& name, int64_t rank);

// Thrown by HashedFileWriter::write when its abort predicate asked to stop.
class WriteAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A new file written in pieces, its bytes hashed on the way (digest == hash_bytes of the whole
// file) and flushed to disk (fsync) by finish(). Meant for the files of a folder that is renamed
// into place once complete (checkpoints, exports).
class HashedFileWriter {
 public:
  // Creates `path`, which must not exist (not even as a symbolic link). `should_abort`, when set,
  // is polled before each piece of at most 64 MiB that reaches the disk. Throws RuntimeFailure
  // naming the path.
  explicit HashedFileWriter(std::string path, std::function<bool()> should_abort = {});
  ~HashedFileWriter();  // an unfinished file is closed and removed
  HashedFileWriter(const HashedFileWriter&) = delete;
  HashedFileWriter& operator=(const HashedFileWriter&) = delete;

  // Appends n bytes. Throws RuntimeFailure (I/O error, naming the path and the reason) or
  // WriteAborted.
  void write(const void* data, size_t n);

  struct Record {
    uint64_t size = 0;
    uint64_t checksum = 0;  // hash_bytes of the contents
  };
  // Flushes and closes the file. Throws RuntimeFailure.
  Record finish();

 private:
  std::string path_;
  std::function<bool()> should_abort_;
  int fd_ = -1;
  StreamingHash hash_;
  uint64_t written_ = 0;
};

}  // namespace titan
