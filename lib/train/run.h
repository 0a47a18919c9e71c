// One training run, put together in the one order it depends on:
//
//   1. context   world, process group, determinism, device (train/run_context.h)
//   2. components  data, model, optimizer, parallelism, checkpointer, step engine, instruments,
//                each by its factory; the config's remaining checks (memory, vocabulary, dataset
//                files); the start point (train/run_components.h)
//   3. outputs   the run folder's lock, config.toml, metrics.jsonl, fingerprint.log, numerics.log,
//                the instruments' folders
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
#include "instruments/instrument.h"
#include "train/run_context.h"
#include "train/summary.h"

namespace titan {

class RunOutputs;
class Trainer;
struct RunComponents;

class Run {
 public:
  // Performs steps 1-5 for `config` with `console` as the console. Throws ConfigError (exit 2)
  // for anything the config, environment or a checkpoint refuses, RuntimeFailure for a damaged
  // checkpoint or an output that cannot be written.
  static std::unique_ptr<Run> open(const Config& config, std::ostream& console,
                                   const RunContextOptions& options = {});

  ~Run();

  Trainer& trainer() { return *trainer_; }
  // Trains the remaining steps (Trainer::train).
  TrainSummary train();

  // The run's instruments, in the order they are called.
  std::vector<Instrument*> instruments() const;
  // Its instrument of type T (the first), or null when the config arms none.
  template <class T>
  T* instrument() const {
    for (Instrument* i : instruments()) {
      if (auto* found = dynamic_cast<T*>(i)) return found;
    }
    return nullptr;
  }

 private:
  Run();

  // Destroyed in reverse: the trainer first, the context last.
  RunContext context_;
  std::unique_ptr<RunComponents> components_;
  std::unique_ptr<RunOutputs> outputs_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace titan
