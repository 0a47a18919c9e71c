// titan-train: parse the config, train, and map failures to exit codes (see README).
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>

#include "compare.h"
#include "config/loader.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/omp_env.h"

namespace {

int run(const std::vector<std::string>& args) {
  if (args.size() > 1 && args[1] == "compare") {
    return titan::run_compare({args.begin() + 2, args.end()}, std::cout, std::cerr);
  }
  titan::CliRequest request = titan::parse_command_line(args);
  switch (request.action) {
    case titan::CliAction::kHelp:
      std::cout << titan::help_text()
                << "\nSubcommand: titan-train compare RUN_A RUN_B [--tolerance REL] [--json]\n"
                   "  where two runs' numerics part (see titan-train compare --help)\n";
      return titan::kExitOk;
    case titan::CliAction::kVersion:
      std::cout << fmt::format("titan-train {}\nlibtorch {}\ncuda available: {}\n", TITAN_VERSION,
                               TORCH_VERSION, torch::cuda::is_available() ? "yes" : "no");
      return titan::kExitOk;
    case titan::CliAction::kPrintConfig:
      std::cout << titan::to_toml(request.config);
      return titan::kExitOk;
    case titan::CliAction::kTrain:
      break;
  }
  titan::Trainer trainer(request.config, std::cout);
  trainer.train();
  return titan::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  titan::ensure_passive_omp_wait(argv);
  std::vector<std::string> args(argv, argv + argc);
  try {
    return run(args);
  } catch (...) {
    std::cout.flush();
    return titan::report_current_exception(std::cerr);
  }
}
