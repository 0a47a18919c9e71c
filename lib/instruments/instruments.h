// The run's instruments, built from its config: the one place that lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ac/recompute.h"
#include "config/config.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "model/model.h"
#include "model/model_args.h"
#include "parallel/data_parallel.h"
#include "step/step.h"

namespace titan {

// What the instruments are built from.
struct InstrumentSetup {
  InstrumentSetup(const Config& run_config, RunFolder run_folder)
      : config(run_config), folder(std::move(run_folder)) {}

  const Config& config;
  RunFolder folder;
  ModelArgs args;
  StepOptions step_options;
  Model model{nullptr};
  // How the ranks hold the model (instruments read this rank's pieces of it, and the numerics
  // trace the gradients it gathers); outlives them.
  DataParallel* parallel = nullptr;
  std::string dataset;  // the data source, as the start-up log names it
  // Where activation checkpointing sends its checked blocks' forward ops (ac/apply.h): the
  // numerics trace connects to it, since a checked block's ops are recorded by its checker.
  std::shared_ptr<ac::OpTraceSinkSlot> checkpointed_ops;
  // The job's group (outlives the instruments; required): this rank's place, and the stop
  // checks of readers of other data (validation).
  ProcessGroup* group = nullptr;
  uint64_t seed = 0;                                // the run's, for readers of other data
  std::shared_ptr<const TextEncoder> text_encoder;  // the training text's (null: bytes)
  // What decides bits beyond the config (fingerprint.log's header and metrics/machine.h), for a
  // step capture's machine.txt; called when a step is captured.
  std::function<std::string()> machine;
};

// Whether the config arms the rerun check: any of its triggers is configured (a rerun check with
// none is not built).
bool rerun_armed(const DebugConfig& debug);

// The instruments the config arms, in the order they are called: the numerics tracer, the
// per-layer norms, precision attribution, step capture, the rerun check, validation, profiling.
// The numerics tracer observes setup.model's forwards, checkpointed_ops and, under FSDP, the
// gradients setup.parallel gathers. Writes nothing; throws ConfigError for what an instrument's
// config or data refuses.
std::vector<std::shared_ptr<Instrument>> make_instruments(const InstrumentSetup& setup);

}  // namespace titan
