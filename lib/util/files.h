// Reading and writing whole files, and line-at-a-time logs that never hold a partial line.
#pragma once

#include <string>

namespace titan {

// The whole contents of the regular file `path`. Throws std::system_error, whose code() is the
// system's reason (EISDIR for a folder), when it cannot be opened or read.
std::string read_file(const std::string& path);

// Writes `contents` to `path` atomically: a temporary file in the same folder, flushed to disk,
// then renamed over `path`. On failure the temporary file is removed and `path` is untouched.
// Throws RuntimeFailure naming the path and the system's reason.
void write_file_atomically(const std::string& path, const std::string& contents);

// A text file written whole lines at a time. Each write is one write(2) of complete lines; when a
// write fails (a full disk), the file is cut back to its last complete line before the error is
// thrown, so readers never see a partial line.
class LineFile {
 public:
  enum class Mode { kTruncate, kAppend };

  // Opens (creating) `path`. Throws RuntimeFailure naming the path.
  LineFile(const std::string& path, Mode mode);
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;

  // Appends `lines` (one or more lines; a final '\n' is added when missing). Throws
  // RuntimeFailure naming the path and the reason.
  void write(const std::string& lines);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  long long size_ = 0;  // bytes of complete lines written so far
};

}  // namespace titan
