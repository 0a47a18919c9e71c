// `titan-train replay CAPTURE_DIR [--device cpu|cuda] [--json] [--section.key value ...]`: a
// captured step (debug.capture_steps) executed again here, compared op by op with the capture.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace titan {

// `args` are the words after "replay". Prints the report (text, or JSON with --json) to `out`
// and errors to `err`. Returns 0 when the step is bitwise identical, 1 when it parted, 2 for bad
// usage or a damaged, altered or foreign capture (named). Failures while executing (out of
// memory) propagate to main.
int run_replay(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

std::string replay_usage();

}  // namespace titan
