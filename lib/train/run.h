// One training run, put together in the one order it depends on:
//
//   1. context   world, process group, determinism, device (train/run_context.h)
//   2. trainer   model, data, optimizer, activation checkpointing, the numerics trace; the
//                config's remaining checks (memory, vocabulary, dataset files); the resume point
//   3. outputs   dump folder lock, config.toml, metrics.jsonl, fingerprint.log, numerics.log
//   4. start-up log
//
// Everything that can refuse the run (steps 1 and 2) happens before any output file is touched.
// The subcommand and the tests open runs this way; there is no other.
#pragma once

#include <iosfwd>
#include <memory>

#include "config/config.h"
#include "train/run_context.h"
#include "train/run_outputs.h"
#include "train/trainer.h"

namespace titan {

class Run {
 public:
  // Performs steps 1-4 for `config` with `console` as the console. Throws ConfigError (exit 2)
  // for anything the config, environment or a checkpoint refuses, RuntimeFailure for a damaged
  // checkpoint or an output that cannot be written.
  static std::unique_ptr<Run> open(const Config& config, std::ostream& console,
                                   const RunContextOptions& options = {});

  const RunContext& context() const { return context_; }
  Trainer& trainer() { return *trainer_; }
  TrainSummary train() { return trainer_->train(); }

 private:
  Run() = default;

  RunContext context_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<RunOutputs> outputs_;
};

}  // namespace titan
