// Building a RunContext, in the one order the run's process-wide state depends on:
//
//   1. world          rank and world size from the launcher's environment (torchrun, Slurm)
//   2. process group  the collectives between ranks (rendezvous; rank 0 draws the seed when unset)
//   3. determinism    seeds, threads, deterministic algorithms, warning handler
//   4. device         cpu or cuda, after the determinism settings CUDA must see first
//   --                the Trainer builds the model, data and optimizer (all remaining validation)
//   5. output sinks   dump folder, config.toml, metrics.jsonl, fingerprint.log
//
// Data parallelism needs the process group before seeding (to agree on the seed); changing the
// order means changing build_run_context only.
#pragma once

#include <iosfwd>

#include "train/run_context.h"

namespace titan {

struct RunContextOptions {
  bool measure_peak_flops = true;  // tests skip the start-up sgemm measurement
};

// Steps 1-4. Throws ConfigError (exit 2) for a bad environment, device or determinism setting.
RunContext build_run_context(const Config& config, std::ostream& log,
                             const RunContextOptions& options = {});

// Step 5: creates the dump folder and locks it (a second run into it is refused), writes
// config.toml, then opens (truncating: an earlier run's outputs there are replaced) metrics.jsonl
// and fingerprint.log with its header. Throws ConfigError when the folder cannot be created or is
// locked, RuntimeFailure when a file cannot be written.
void open_output_sinks(RunContext& context);

// "auto" -> cuda when available, else cpu. Throws ConfigError for "cuda" without CUDA.
c10::Device resolve_device(DeviceChoice choice);

}  // namespace titan
