#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "util/error.h"

namespace titan {
namespace {

std::system_error system_error(int code, const std::string& path) {
  return std::system_error(code, std::generic_category(), path);
}

// Writes all of `data`, retrying short writes. Returns 0 or the errno of the failure.
int write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t written = ::write(fd, data, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (written == 0) return EIO;
    data += written;
    n -= static_cast<size_t>(written);
  }
  return 0;
}

}  // namespace

std::string file_type_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

void refuse_input(const std::string& path, unsigned mode) {
  throw FileRefused(path, "is " + file_type_name(mode) + ", not a regular file",
                    "titan-train reads regular files only (a FIFO or a device could block or "
                    "never end); point it at a file");
}

namespace {

[[noreturn]] void refuse_output(const std::string& path, unsigned mode) {
  throw FileRefused(path,
                    "is " + file_type_name(mode) +
                        ": titan-train writes regular files only and never through a link",
                    "remove it (titan-train creates its files itself), or choose another folder");
}

// A new file `path`.tmp that will replace `path` once renamed over it; a stale one (a killed
// run's, or anything planted there) is removed first, and the new one is created exclusively, so
// nothing at that name is followed or written into.
int create_replacement(const std::string& path, std::string& tmp) {
  check_output_target(path);
  tmp = path + ".tmp";
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    const int code = errno;  // before lstat, which sets errno of its own
    struct stat st {};
    if (::lstat(tmp.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_output(tmp, st.st_mode);
    throw RuntimeFailure("cannot write " + tmp + ": " + std::strerror(code));
  }
  return open_output_file(tmp, O_WRONLY | O_CREAT | O_EXCL);
}

}  // namespace

void check_output_target(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_output(path, st.st_mode);
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw system_error(errno, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int code = errno;
    ::close(fd);
    throw system_error(code, path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) throw system_error(EISDIR, path);
    refuse_input(path, st.st_mode);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw system_error(EFBIG, path);
  }
  // Read straight into a buffer of the file's size (a checkpoint file is gigabytes); a file that
  // grows meanwhile is read to its end all the same, up to the bound.
  std::string contents(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t used = 0;
  for (;;) {
    if (used > max_bytes) {
      ::close(fd);
      throw system_error(EFBIG, path);
    }
    if (used == contents.size())
      contents.resize(std::min<uint64_t>(contents.size() * 2, max_bytes + 1));
    ssize_t n = ::read(fd, contents.data() + used, contents.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int code = errno;
      ::close(fd);
      throw system_error(code, path);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  contents.resize(used);
  return contents;
}

int open_output_file(const std::string& path, int flags) {
  check_output_target(path);
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int code = errno;
    struct stat st {};
    // Something took the name since the check (ELOOP: a link; ENXIO: a FIFO without a reader).
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_output(path, st.st_mode);
    throw RuntimeFailure("cannot write " + path + ": " + std::strerror(code));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const unsigned mode = st.st_mode;
    ::close(fd);
    refuse_output(path, mode);
  }
  return fd;
}

namespace {

FileRefused not_a_folder(const std::string& path, unsigned mode) {
  return FileRefused(path, "is " + file_type_name(mode) + ", not a folder",
                     "titan-train makes this folder itself and does not follow a link here; "
                     "remove it, or choose another job.dump_folder");
}

}  // namespace

void make_output_folder(const std::string& path, FolderLink link) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  struct stat st {};
  const int found =
      link == FolderLink::kFollow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (found == 0 && !S_ISDIR(st.st_mode)) throw not_a_folder(path, st.st_mode);
  if (found != 0 || ec) {
    throw RuntimeFailure("cannot create folder " + path + ": " +
                             (ec ? ec.message() : std::string(std::strerror(errno))),
                         "choose a writable folder");
  }
}

std::string make_output_folder_below(const std::string& root, const std::string& relative) {
  make_output_folder(root, FolderLink::kFollow);
  std::string path = root;
  for (const auto& part : std::filesystem::path(relative)) {
    if (part.empty() || part == ".") continue;
    path += "/" + part.string();
    const bool made = ::mkdir(path.c_str(), 0777) == 0;
    const int code = errno;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      throw RuntimeFailure(
          "cannot create folder " + path + ": " + std::strerror(made ? errno : code),
          "choose a writable folder");
    }
    if (!S_ISDIR(st.st_mode)) throw not_a_folder(path, st.st_mode);
  }
  return path;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  std::string tmp;
  const int fd = create_replacement(path, tmp);
  int code = write_all(fd, contents.data(), contents.size());
  if (code == 0 && ::fsync(fd) != 0) code = errno;
  if (::close(fd) != 0 && code == 0) code = errno;
  if (code == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) code = errno;
  if (code != 0) {
    std::remove(tmp.c_str());
    throw RuntimeFailure("cannot write " + path + ": " + std::strerror(code));
  }
}

LineFile::LineFile(const std::string& path, Mode mode) : path_(path) {
  if (mode == Mode::kAppend) {
    fd_ = open_output_file(path, O_WRONLY | O_CREAT);
    size_ = ::lseek(fd_, 0, SEEK_END);
    return;
  }
  std::string tmp;
  fd_ = create_replacement(path, tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int code = errno;
    ::close(fd_);
    std::remove(tmp.c_str());
    throw RuntimeFailure("cannot write " + path + ": " + std::strerror(code));
  }
}

LineFile::~LineFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LineFile::write(const std::string& lines) {
  if (!lines.empty() && lines.back() == '\n') {
    append(lines);
  } else {
    append(lines + '\n');
  }
}

void LineFile::append(const std::string& bytes) {
  int code = write_all(fd_, bytes.data(), bytes.size());
  if (code != 0) {
    // Drop whatever part of the bytes reached the file; it ends where the last write did.
    if (::ftruncate(fd_, size_) == 0) ::lseek(fd_, size_, SEEK_SET);
    throw RuntimeFailure("cannot write " + path_ + ": " + std::strerror(code));
  }
  size_ += static_cast<long long>(bytes.size());
}

int64_t step_after_prefix(const std::string& line, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (line.compare(0, n, prefix) != 0) return -1;
  char* end = nullptr;
  const long long step = std::strtoll(line.c_str() + n, &end, 10);
  return end != line.c_str() + n && step >= 0 ? step : -1;
}

void rewrite_log_through_step(const std::string& path, const std::string& header, int64_t last_step,
                              const LineStepRule& step_of_line) {
  check_output_target(path);  // a planted link is refused before it is read
  std::string kept = header;
  if (last_step > 0) {
    std::string old;
    try {
      old = read_file(path, kMaxLogFileBytes);
    } catch (const std::system_error&) {
      old.clear();  // nothing to continue: the header alone
    }
    int64_t step = 0;
    for (size_t begin = 0, end; (end = old.find('\n', begin)) != std::string::npos;
         begin = end + 1) {
      const std::string line = old.substr(begin, end - begin + 1);
      const int64_t starts = step_of_line(line);
      if (starts >= 0) step = starts;
      if (step >= 1 && step <= last_step) kept += line;
    }
  }
  write_file_atomically(path, kept);
}

void fsync_folder(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int code = fd < 0 ? errno : 0;
  if (fd >= 0 && ::fsync(fd) != 0) code = errno;
  if (fd >= 0) ::close(fd);
  if (code != 0) throw RuntimeFailure("cannot flush folder " + path + ": " + std::strerror(code));
}

HashedFileWriter::HashedFileWriter(std::string path, std::function<bool()> should_abort)
    : path_(std::move(path)), should_abort_(std::move(should_abort)) {
  fd_ = open_output_file(path_, O_WRONLY | O_CREAT | O_EXCL);
}

HashedFileWriter::~HashedFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::remove(path_.c_str());
}

void HashedFileWriter::write(const void* data, size_t n) {
  constexpr size_t kPiece = size_t(64) << 20;
  constexpr size_t kOverlapMin = size_t(1) << 20;
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (should_abort_ && should_abort_()) throw WriteAborted("writing " + path_ + " was aborted");
    const size_t piece = std::min(n, kPiece);
    // Hashing and writing read the same bytes: overlapped, a save costs about the larger of the
    // two instead of their sum.
    std::thread hashing;
    if (piece >= kOverlapMin) {
      hashing = std::thread([this, p, piece] { hash_.update(p, piece); });
    } else {
      hash_.update(p, piece);
    }
    const int code = write_all(fd_, p, piece);
    if (hashing.joinable()) hashing.join();
    if (code != 0) throw RuntimeFailure("cannot write " + path_ + ": " + std::strerror(code));
    // Start writing this piece back now, so that finish()'s fsync does not meet gigabytes of
    // dirty pages at once (the kernel would throttle the writes meanwhile anyway).
    ::sync_file_range(fd_, static_cast<off_t>(written_), static_cast<off_t>(piece),
                      SYNC_FILE_RANGE_WRITE);
    written_ += piece;
    p += piece;
    n -= piece;
  }
}

HashedFileWriter::Record HashedFileWriter::finish() {
  int code = ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && code == 0) code = errno;
  fd_ = -1;
  if (code != 0) {
    std::remove(path_.c_str());
    throw RuntimeFailure("cannot write " + path_ + ": " + std::strerror(code));
  }
  return Record{hash_.size(), hash_.digest()};
}

std::string rank_file_name(const std::string& name, int64_t rank) {
  if (rank == 0) return name;
  const auto dot = name.rfind('.');
  const std::string tag = ".rank" + std::to_string(rank);
  return dot == std::string::npos ? name + tag : name.substr(0, dot) + tag + name.substr(dot);
}

}  // namespace titan
