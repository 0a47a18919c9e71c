// titan-train: pick the subcommand, run it, and map failures to exit codes (see README).
#include <iostream>
#include <string>
#include <vector>

#include "app/compare.h"
#include "app/export.h"
#include "app/tokenize.h"
#include "app/train_command.h"
#include "util/error.h"
#include "util/malloc_tuning.h"
#include "util/omp_env.h"

namespace {

using Command = int (*)(const std::vector<std::string>& args, std::ostream& out);

struct Subcommand {
  const char* name;
  Command run;  // receives the arguments after the subcommand's name, behind argv[0]
};

// Subcommands are named by the first argument; anything else is the training command.
int compare_command(const std::vector<std::string>& args, std::ostream& out) {
  return titan::run_compare({args.begin() + 1, args.end()}, out, std::cerr);
}

int export_command(const std::vector<std::string>& args, std::ostream& out) {
  return titan::run_export({args.begin() + 1, args.end()}, out);
}

int tokenize_command(const std::vector<std::string>& args, std::ostream& out) {
  return titan::run_tokenize({args.begin() + 1, args.end()}, out, std::cerr);
}

const Subcommand kSubcommands[] = {
    {"train", titan::run_train_command},
    {"compare", compare_command},
    {"export", export_command},
    {"tokenize", tokenize_command},
};

int dispatch(std::vector<std::string> args) {
  if (args.size() > 1) {
    for (const auto& sub : kSubcommands) {
      if (args[1] == sub.name) {
        args.erase(args.begin() + 1);
        return sub.run(args, std::cout);
      }
    }
  }
  return titan::run_train_command(args, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    titan::check_thread_environment();
    titan::ensure_idle_threads_sleep(argv);
    titan::apply_library_log_level();
    titan::tune_malloc_for_training();
    return dispatch(std::vector<std::string>(argv, argv + argc));
  } catch (...) {
    std::cout.flush();
    return titan::report_current_exception(std::cerr);
  }
}
