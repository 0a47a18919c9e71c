#include "app/train_command.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <iostream>
#include <ostream>

#include "config/loader.h"
#include "train/run.h"
#include "train/run_context.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/stop_signal.h"

namespace titan {

int run_train_command(const std::vector<std::string>& args, std::ostream& out) {
  CliRequest request = parse_command_line(args);
  if (request.action != CliAction::kTrain) restore_default_stop_signals();
  switch (request.action) {
    case CliAction::kHelp:
      out << help_text();
      return check_result_written(out, std::cerr, kExitOk);
    case CliAction::kVersion:
      out << fmt::format("titan-train {}\nlibtorch {}\ncuda available: {}\ncuda compiled in: {}\n",
                         TITAN_VERSION, TORCH_VERSION, torch::cuda::is_available() ? "yes" : "no",
                         kCudaCompiledIn ? "yes" : "no");
      return check_result_written(out, std::cerr, kExitOk);
    case CliAction::kPrintConfig:
      check_config_for_run(request.config);  // the same refusals as a run, before any output
      out << to_toml(request.config);
      return check_result_written(out, std::cerr, kExitOk);
    case CliAction::kTrain:
      break;
  }
  install_stop_signal_handlers();
  RunContextOptions options;
  options.errors = &std::cerr;
  options.console_is_terminal = ::isatty(STDOUT_FILENO) == 1;
  Run::open(request.config, out, options)->train();
  return kExitOk;
}

}  // namespace titan
