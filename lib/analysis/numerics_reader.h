// Reading numerics.log back (the format lib/metrics/numerics_log.h writes), for `compare` and
// the rerun check's comparison of traced executions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/numerics_log.h"

namespace titan {

struct NumericsLogFile {
  std::string path;
  std::string level;  // "blocks" or "ops"
  int64_t freq = 1;
  std::vector<NumericsStep> steps;
};

// Parses numerics.log text. Throws ConfigError naming "<path>:<line>" for anything malformed,
// including a file cut short (a step without its "end step" line, a last line without newline).
NumericsLogFile parse_numerics_log(const std::string& text, const std::string& path);
NumericsLogFile read_numerics_log(const std::string& path);

}  // namespace titan
