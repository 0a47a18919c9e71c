// `titan-train replay CAPTURE_DIR`: executes a captured step (instruments/step_capture.h) again on
// this machine and build, from the captured state and batch, as the capture did (precision
// attribution's executions: the run's dtype, and float64 with each op's added error), and
// compares the two sides op by op (train/replay_report.h).
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "instruments/numerics_trace.h"
#include "train/replay_report.h"

namespace titan {

struct ReplayRequest {
  std::string capture;  // the capture's folder, <dump_folder>/capture/step<N>
  // "--section.key value" overrides of the captured config: one factor changed on purpose
  // (training.cpu_threads, debug.cpu_kernels, ...).
  std::vector<std::pair<std::string, std::string>> overrides;
  std::optional<std::string> device;  // --device cpu|cuda: training.device
};

// Checks the capture whole before anything is built (check_capture_folder), applies the
// overrides, builds the run's context (threads, kernels, device) and model, loads the captured
// state, executes the step and compares. Throws ConfigError (exit 2) for a damaged, altered or
// foreign capture or a bad override, naming the file or key. `log` gets the set-up's warnings.
// `hook`: the test-only seam of precision_probe.h, applied to this side's executions.
ReplayReport replay_capture(const ReplayRequest& request, std::ostream& log,
                            std::shared_ptr<BlockOutputHook> hook = nullptr);

}  // namespace titan
