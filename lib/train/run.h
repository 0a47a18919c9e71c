// One training run, put together in the one order it depends on:
//
//   1. context   world, process group, determinism, device (train/run_context.h)
//   2. parts     model, data, optimizer, activation checkpointing, the numerics trace, the
//                components; the config's remaining checks (memory, vocabulary, dataset files);
//                the start point (train/run_parts.h)
//   3. outputs   dump folder lock, config.toml, metrics.jsonl, fingerprint.log, numerics.log
//   4. trainer   the loop, at the start point
//   5. start-up log
//
// Everything that can refuse the run (steps 1 and 2) happens before any output file is touched.
// The subcommand and the tests open runs this way; there is no other.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <vector>

#include "config/config.h"
#include "train/run_context.h"

namespace titan {

class NumericsTracer;
class PrecisionProbe;
class RunOutputs;
class Trainer;
struct RunParts;

struct TrainSummary {
  int64_t steps = 0;
  double seconds = 0;
  double mean_tps = 0;             // over all ranks
  double checksum_seconds = 0;     // spent on fingerprint.log parameter checksums
  double layer_norm_seconds = 0;   // measuring per-layer norms (and histograms)
  int64_t layer_norm_steps = 0;    // steps they were measured at
  double tensorboard_seconds = 0;  // encoding and writing event records
  int64_t tensorboard_writes = 0;
  int64_t reruns = 0;          // steps the rerun check re-executed
  std::vector<double> losses;  // one per step of this process's run
  double cpu_user_s = 0;       // the process's CPU time in the steps
  double cpu_system_s = 0;
  double minor_faults = 0;  // in the steps
};

class Run {
 public:
  // Performs steps 1-5 for `config` with `console` as the console. Throws ConfigError (exit 2)
  // for anything the config, environment or a checkpoint refuses, RuntimeFailure for a damaged
  // checkpoint or an output that cannot be written.
  static std::unique_ptr<Run> open(const Config& config, std::ostream& console,
                                   const RunContextOptions& options = {});

  ~Run();

  const RunContext& context() const { return context_; }
  Trainer& trainer() { return *trainer_; }
  // Trains the remaining steps (Trainer::train).
  TrainSummary train();
  // The numerics.log recorder; null when debug.numerics_trace is "none" and no rerun is armed.
  NumericsTracer* numerics_tracer();
  // The precision probe; null without debug.precision_steps.
  PrecisionProbe* precision_probe();

 private:
  Run();

  // Destroyed in reverse: the trainer first, the context last.
  RunContext context_;
  std::unique_ptr<RunParts> parts_;
  std::unique_ptr<RunOutputs> outputs_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace titan
