// The safetensors format (Hugging Face's, read by `safetensors.torch.load_file`): an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes; offsets
// count from the end of the header.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/files.h"

namespace titan {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

using SafetensorsMetadata = std::map<std::string, std::string>;

// Writes `tensors` (in order, packed) and `metadata` to `out`. Tensors on another device or not
// contiguous are copied first. Throws RuntimeFailure for a dtype safetensors has no name for
// (complex, quantized), and whatever `out` throws.
void write_safetensors(HashedFileWriter& out, const std::vector<NamedTensor>& tensors,
                       const SafetensorsMetadata& metadata);

struct SafetensorsContents {
  std::vector<NamedTensor> tensors;  // CPU, in the header's order (they share the file's bytes)
  SafetensorsMetadata metadata;

  // The tensor called `name`, or an undefined tensor.
  at::Tensor find(const std::string& name) const;
};

// One tensor as the header describes it; its bytes are [begin, end) from the end of the header.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in the header's order
  SafetensorsMetadata metadata;
  std::string json;         // the header's bytes, as the file holds them
  uint64_t data_start = 0;  // the file offset the entries' offsets count from
};

// Returns the `n` bytes at `offset` of the file being parsed.
using ReadBytes = std::function<std::string(uint64_t offset, uint64_t n)>;

// Reads and checks the header of a file of `file_size` bytes, as parse_safetensors does, without
// reading the tensors' data (the entries are checked to lie inside the file).
SafetensorsHeader parse_safetensors_header(const ReadBytes& read, uint64_t file_size,
                                           const std::string& source);

// Parses a whole file's bytes. Everything is checked before a tensor is built: the header length,
// the JSON (with its column), each entry's dtype, shape and offsets (inside the data, matching
// the shape, not overlapping), duplicate names. Throws RuntimeFailure naming `source` (the file)
// and what is wrong. The tensors are views of `bytes` (kept alive by them, so a file is held in
// memory once), or copies where a tensor's data is not aligned to its element size.
SafetensorsContents parse_safetensors(std::string bytes, const std::string& source);

}  // namespace titan
