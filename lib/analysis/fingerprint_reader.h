// Reading fingerprint.log back (the format lib/metrics/fingerprint.h writes), for `compare`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace titan {

struct FingerprintStep {
  int64_t step = 0;
  double loss = 0;  // exact bits, from the hex floats
  double grad_norm = 0;
  double lr = 0;
  int64_t tokens = 0;
  std::optional<uint64_t> params;  // parameter checksum, every fingerprint_freq steps
  int64_t line = 0;
};

struct FingerprintFile {
  std::string path;
  // Header lines in file order as (key, rest of the line): ("seed", "11"), ("device",
  // "cpu \"...\""), ("cudnn_deterministic", "false cudnn_benchmark false").
  std::vector<std::pair<std::string, std::string>> header;
  std::vector<FingerprintStep> steps;  // 1, 2, 3, ... in order

  const std::string* header_value(const std::string& key) const;
};

// Throws ConfigError naming "<path>:<line>" for a malformed or truncated file (a header key
// missing, a step line that does not parse, steps out of order, a last line cut short).
FingerprintFile parse_fingerprint_log(const std::string& text, const std::string& path);
FingerprintFile read_fingerprint_log(const std::string& path);

}  // namespace titan
