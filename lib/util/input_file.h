// A regular file read in pieces at given offsets, for formats whose header says where each part
// lies (safetensors): a reader takes only the bytes it needs.
#pragma once

#include <cstdint>
#include <string>

namespace titan {

class InputFile {
 public:
  // Opens the regular file `path` (a link to one is followed, as read_file does). Throws
  // FileRefused when it is not a regular file, std::system_error with EFBIG when it holds more
  // than `max_bytes`, and std::system_error with the system's reason when it cannot be opened.
  InputFile(const std::string& path, uint64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Fills `out` with the `n` bytes at `offset`. Throws RuntimeFailure naming the file when they
  // lie past its end (it shrank since it was opened) or the read fails.
  void read_at(uint64_t offset, void* out, uint64_t n);

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }              // as opened
  uint64_t bytes_read() const { return bytes_read_; }  // by read_at, all calls together

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace titan
