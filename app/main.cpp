// titan-train: pick the subcommand, run it, and map failures to exit codes (see README).
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// A result that could not be written (stdout on a full disk, or a device that refuses writes)
// is a failure: exit 1 with the reason on stderr, not the subcommand's own verdict.
int with_output_checked(int code) {
  errno = 0;
  std::cout.flush();
  if (std::cout) return code;
  const int error = errno;
  std::cerr << "titan-train: error: the result could not be written to stdout"
            << (error != 0 ? std::string(" (") + std::strerror(error) + ")" : std::string())
            << "\n  hint: check the disk or the file that stdout goes to\n";
  return code == titan::kExitOk ? titan::kExitRuntimeError : code;
}

}  // namespace

// Runs before the shared libraries' static initializers (ELF .preinit_array): libtorch's
// allocate, and a std::bad_alloc there would otherwise end in "terminate called after throwing".
void install_handlers_before_libraries(int, char**, char**) {
  titan::install_out_of_memory_terminate_handler();
}
__attribute__((section(".preinit_array"),
               used)) void (*const preinit_handlers)(int, char**,
                                                     char**) = install_handlers_before_libraries;

int main(int argc, char** argv) {
  try {
    titan::check_thread_environment();
    titan::ensure_idle_threads_sleep(argv);
    titan::apply_library_log_level();
    titan::tune_malloc_for_training();
    return with_output_checked(dispatch(std::vector<std::string>(argv, argv + argc)));
  } catch (...) {
    std::cout.flush();
    bool out_of_memory = false;
    const int code = titan::report_current_exception(std::cerr, &out_of_memory);
    if (out_of_memory) {
      // Exit handlers would join library threads that may be stuck retrying an allocation.
      std::cerr.flush();
      ::_exit(code);
    }
    return code;
  }
}
