#include "util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "util/error.h"
#include "util/files.h"

namespace titan {

InputFile::InputFile(const std::string& path, uint64_t max_bytes) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), path);
  struct stat st {};
  int code = ::fstat(fd_, &st) != 0 ? errno : 0;
  if (code == 0 && S_ISDIR(st.st_mode)) code = EISDIR;
  if (code == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    code = EFBIG;
  }
  if (code != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    if (code != 0) throw std::system_error(code, std::generic_category(), path);
    refuse_input(path, st.st_mode);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* out, uint64_t n) {
  auto* dst = static_cast<char*>(out);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string why = got < 0 ? std::strerror(errno) : "the file ends before them";
      throw RuntimeFailure(
          "cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
              " of " + path_ + ": " + why,
          "the file changed while it was read, or the disk failed: check it and run again");
    }
    done += static_cast<uint64_t>(got);
  }
  bytes_read_ += n;
}

}  // namespace titan
