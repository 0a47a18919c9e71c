// Comparing the op trace of a block's forward with that of its recomputation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ac/op_trace.h"
#include "ac/recompute.h"

namespace titan::ac {

struct RecomputeComparison {
  std::string block_name;  // "layers.3"
  RecomputeCheck check = RecomputeCheck::kDefault;
  const OpTrace* forward = nullptr;
  const OpTrace* recompute = nullptr;
  uint64_t forward_output_checksum = 0;  // bitwise mode
  uint64_t recompute_output_checksum = 0;
  bool debug = false;     // the mismatch carries both traces (printed and saved once named)
  std::string debug_dir;  // "" means print only
};

// Position of the first op where the traces differ (by name, output count, metadata, and in
// bitwise mode checksums), or nullopt when they agree. A trace that is a prefix of the other
// differs at the shorter one's length.
std::optional<size_t> first_difference(const OpTrace& a, const OpTrace& b, bool compare_checksums);

// Throws RecomputeMismatch naming the block, the position and name of the first differing op and
// both sides' metadata (or checksums); in debug mode it carries both traces (first divergent line
// marked), for RecomputeMismatch::at_step to print and save. Returns when nothing differs.
void raise_on_mismatch(const RecomputeComparison& c);

// Both traces, one line per op, the first divergent line marked with ">>".
std::string format_traces(const RecomputeComparison& c, std::optional<size_t> divergent);

}  // namespace titan::ac
