// The training command (titan-train's default): parse the command line, then set up, build and
// run in the order train/run.h documents.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace titan {

// args[0] is the program name. Returns the exit code; throws the project's errors (main maps
// them to exit codes, see util/error.h).
int run_train_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace titan
