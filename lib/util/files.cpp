#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

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

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw system_error(errno, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int code = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    throw system_error(code, path);
  }
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int code = errno;
      ::close(fd);
      throw system_error(code, path);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeFailure("cannot write " + tmp + ": " + std::strerror(errno));
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
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kTruncate ? O_TRUNC : 0);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw RuntimeFailure("cannot write " + path + ": " + std::strerror(errno));
  size_ = ::lseek(fd_, 0, SEEK_END);
}

LineFile::~LineFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LineFile::write(const std::string& lines) {
  std::string text = lines;
  if (text.empty() || text.back() != '\n') text += '\n';
  int code = write_all(fd_, text.data(), text.size());
  if (code != 0) {
    // Drop whatever part of the lines reached the file; the file ends at a whole line again.
    if (::ftruncate(fd_, size_) == 0) ::lseek(fd_, size_, SEEK_SET);
    throw RuntimeFailure("cannot write " + path_ + ": " + std::strerror(code));
  }
  size_ += static_cast<long long>(text.size());
}

}  // namespace titan
