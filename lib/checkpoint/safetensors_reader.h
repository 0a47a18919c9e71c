// A safetensors file read tensor by tensor, row range by row range: a rank that keeps some rows
// of each tensor reads those bytes only, and nothing holds the whole file at once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "checkpoint/safetensors.h"
#include "util/input_file.h"

namespace titan {

class SafetensorsReader {
 public:
  // Opens `path` (as InputFile: a regular file of at most `max_bytes`) and reads and checks its
  // header (parse_safetensors_header). Throws what those throw.
  SafetensorsReader(const std::string& path, uint64_t max_bytes);

  const SafetensorsHeader& header() const { return header_; }

  // Rows [begin, end) of `entry` (one of header().entries) along its first dimension, as a new
  // CPU tensor of the entry's dtype; a 0-d entry is read whole. Requires 0 <= begin <= end <=
  // the first dimension. Throws RuntimeFailure when the file no longer holds those bytes.
  at::Tensor read_rows(const SafetensorsEntry& entry, int64_t begin, int64_t end);

  const std::string& path() const { return file_.path(); }
  uint64_t bytes_read() const { return file_.bytes_read(); }

 private:
  InputFile file_;
  SafetensorsHeader header_;
};

}  // namespace titan
