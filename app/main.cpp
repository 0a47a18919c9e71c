// titan-train: parse the config, train, and map failures to exit codes (see README).
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>

#include "config/loader.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/omp_env.h"

namespace {

int run(const std::vector<std::string>& args) {
  titan::CliRequest request = titan::parse_command_line(args);
  switch (request.action) {
    case titan::CliAction::kHelp:
      std::cout << titan::help_text();
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

void print_error(const char* kind, const std::string& message, const std::string& hint) {
  std::cout.flush();
  std::cerr << "titan-train: " << kind << ": " << message << "\n";
  if (!hint.empty()) std::cerr << "  hint: " << hint << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  titan::ensure_passive_omp_wait(argv);
  std::vector<std::string> args(argv, argv + argc);
  try {
    return run(args);
  } catch (const titan::ConfigError& e) {
    print_error("config error", e.what(), e.hint());
    return titan::kExitConfigError;
  } catch (const titan::CheckFailure& e) {
    print_error("check failed", e.what(), "");
    return titan::kExitCheckFailed;
  } catch (const titan::RuntimeFailure& e) {
    print_error("error", e.what(), e.hint());
    return titan::kExitRuntimeError;
  } catch (const c10::Error& e) {
    print_error("error", e.what_without_backtrace(), "");
    return titan::kExitRuntimeError;
  } catch (const std::exception& e) {
    print_error("error", e.what(), "");
    return titan::kExitRuntimeError;
  }
}
