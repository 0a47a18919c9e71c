// Reader for the PyTorch reference state (scripts/reference/llama_reference.py writes it).
//
// Format, little-endian: magic "TITNREF1", uint32 version (1), uint32 record count, then records:
// uint32 name length, name, uint8 kind (0 float32 tensor, 1 int64 tensor, 2 text); tensors have
// uint32 ndim, ndim x int64 dims, raw row-major data; text has uint64 length and bytes.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace titan::test {

struct ReferenceState {
  std::map<std::string, std::string> config;  // the "config" record's key=value lines
  std::map<std::string, at::Tensor> tensors;  // every tensor record by name
  std::vector<std::string> order;             // tensor names in file order

  const at::Tensor& tensor(const std::string& name) const;  // throws when missing
  double number(const std::string& key) const;              // config value as a number
  const std::string& text(const std::string& key) const;
};

// Throws std::runtime_error naming the path and what is wrong (bad magic, version, truncation).
ReferenceState load_reference_state(const std::string& path);

}  // namespace titan::test
