// `titan-train compare RUN_A RUN_B [--tolerance REL] [--json]`: where two runs' numerics part.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace titan {

// `args` are the words after "compare". Prints the report (text, or JSON with --json) to `out`
// and errors to `err`. Returns 0 when the runs are identical over their common steps (or within
// --tolerance), 1 when they diverge, 2 for bad usage or a missing, malformed or truncated input
// (named with its line).
int run_compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The usage text (also printed by `titan-train compare --help`).
std::string compare_usage();

}  // namespace titan
