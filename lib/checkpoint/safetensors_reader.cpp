#include "checkpoint/safetensors_reader.h"

#include <stdexcept>

namespace titan {

SafetensorsReader::SafetensorsReader(const std::string& path, uint64_t max_bytes)
    : file_(path, max_bytes) {
  header_ = parse_safetensors_header(
      [&](uint64_t offset, uint64_t n) {
        std::string bytes(n, '\0');
        file_.read_at(offset, bytes.data(), n);
        return bytes;
      },
      file_.size(), path);
}

at::Tensor SafetensorsReader::read_rows(const SafetensorsEntry& entry, int64_t begin, int64_t end) {
  std::vector<int64_t> shape = entry.shape;
  if (shape.empty()) {
    begin = 0;
    end = 1;
  } else {
    if (begin < 0 || begin > end || end > shape[0]) {
      throw std::invalid_argument("read_rows: rows outside " + entry.name);
    }
    shape[0] = end - begin;
  }
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(entry.dtype));
  const uint64_t whole_rows = entry.shape.empty() ? 1 : static_cast<uint64_t>(entry.shape[0]);
  const uint64_t row_bytes = whole_rows == 0 ? 0 : (entry.end - entry.begin) / whole_rows;
  const uint64_t n = row_bytes * static_cast<uint64_t>(end - begin);
  if (n > 0) {
    file_.read_at(header_.data_start + entry.begin + row_bytes * static_cast<uint64_t>(begin),
                  out.data_ptr(), n);
  }
  return out;
}

}  // namespace titan
