// The run's instruments, built from its config: the one place that lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "instruments/numerics_trace.h"
#include "model/llama.h"
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
  int64_t rank = 0;
  ModelArgs args;
  StepOptions step_options;
  Transformer model{nullptr};
  // How the ranks hold the model (instruments read this rank's pieces of it); outlives them.
  const DataParallel* parallel = nullptr;
  std::string dataset;              // the data source, as the start-up log names it
  bool writes_tensorboard = false;  // this rank writes event files (histograms)
  // The numerics tracer (make_numerics_tracer): built before activation checkpointing, which
  // passes it the ops of the blocks it checks; null when neither numerics.log nor the rerun
  // check needs it.
  std::shared_ptr<NumericsTracer> tracer;
  // For readers of other data (validation): the seed, this rank's place and the data order, and
  // the job's group (outlives the instruments) for their stop checks.
  uint64_t seed = 0;
  ProcessGroup* group = nullptr;
  int64_t world = 1;
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
// Writes nothing; throws ConfigError for what an instrument's config or data refuses.
std::vector<std::shared_ptr<Instrument>> make_instruments(const InstrumentSetup& setup);

}  // namespace titan
