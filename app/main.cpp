// titan-train: pick the subcommand, run it, and map failures to exit codes (see README).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/compare.h"
#include "app/export.h"
#include "app/replay.h"
#include "app/tokenize.h"
#include "app/train_command.h"
#include "util/env_switch.h"
#include "util/error.h"
#include "util/malloc_tuning.h"
#include "util/memory_limit.h"
#include "util/omp_env.h"
#include "util/stop_signal.h"

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

int replay_command(const std::vector<std::string>& args, std::ostream& out) {
  return titan::run_replay({args.begin() + 1, args.end()}, out, std::cerr);
}

int tokenize_command(const std::vector<std::string>& args, std::ostream& out) {
  return titan::run_tokenize({args.begin() + 1, args.end()}, out, std::cerr);
}

const Subcommand kSubcommands[] = {
    {"train", titan::run_train_command}, {"compare", compare_command},   {"export", export_command},
    {"replay", replay_command},          {"tokenize", tokenize_command},
};

int dispatch(std::vector<std::string> args) {
  if (args.size() > 1) {
    for (const auto& sub : kSubcommands) {
      if (args[1] == sub.name) {
        args.erase(args.begin() + 1);
        // Training stops between steps and tokenize between documents; the others end as a
        // signal's default action does.
        if (sub.run != titan::run_train_command && sub.run != tokenize_command)
          titan::restore_default_stop_signals();
        return sub.run(args, std::cout);
      }
    }
  }
  return titan::run_train_command(args, std::cout);
}

}  // namespace

// Ends the process with `code` once every stream is flushed, without exit handlers: OpenBLAS's
// joins its worker threads, and a worker that could not get its buffer (an address-space limit)
// retries forever, so a finished run, even --version, would never exit. Every file titan-train
// writes is closed before main returns.
static int end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

// The subcommands whose exit 1 is a verdict (parted), so that a failure must not be 1.
bool gives_a_verdict(const char* command) {
  return std::strcmp(command, "compare") == 0 || std::strcmp(command, "replay") == 0;
}

// Runs before the shared libraries' static initializers (ELF .preinit_array): libtorch's
// allocate, and a std::bad_alloc there would otherwise end in "terminate called after throwing";
// and its start-up takes seconds on a loaded machine, in which a SIGTERM would otherwise kill a
// run with no word (the training command then stops before writing anything).
void install_handlers_before_libraries(int argc, char** argv, char**) {
  titan::install_out_of_memory_terminate_handler(
      argc > 1 && gives_a_verdict(argv[1]) ? titan::kExitNoVerdict : titan::kExitRuntimeError);
  titan::record_stop_signals();
  // Past a file-size limit (ulimit -f) a write then fails with EFBIG, which the writers report
  // naming the file, instead of SIGXFSZ ending the process mid-line with no word.
  std::signal(SIGXFSZ, SIG_IGN);
}
__attribute__((section(".preinit_array"),
               used)) void (*const preinit_handlers)(int, char**,
                                                     char**) = install_handlers_before_libraries;

int main(int argc, char** argv) {
  try {
    titan::check_thread_environment();
    titan::check_env_switches();
    titan::check_stack_limit();
    titan::ensure_idle_threads_sleep(argv);
    titan::apply_library_log_level();
    titan::tune_malloc_for_training();
    return end_process(dispatch(std::vector<std::string>(argv, argv + argc)));
  } catch (...) {
    std::cout.flush();
    return end_process(titan::report_current_exception(std::cerr));
  }
}
