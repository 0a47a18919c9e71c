// RunContext: the process-wide set-up of one run, built in the one order that state depends on:
//
//   1. world          rank and world size from the launcher's environment (torchrun, Slurm)
//   2. process group  the collectives between ranks (rendezvous; rank 0 draws the seed when unset)
//   3. determinism    seeds, threads, deterministic algorithms, warning handler
//   4. device         cpu or cuda, after the determinism settings CUDA must see first
//
// Data parallelism needs the process group before seeding (to agree on the seed); changing the
// order means changing build_run_context only. Nothing writes a context after it is built
// (lib/train/run.h holds it const).
#pragma once

#include <c10/core/Device.h>

#include <iosfwd>
#include <memory>

#include "config/config.h"
#include "determinism/determinism.h"
#include "distributed/process_group.h"
#include "distributed/world.h"

namespace titan {

struct RunContext {
  Config config;                // resolved; debug.seed holds the seed actually used
  std::ostream* log = nullptr;  // this rank's console (a silent one for ranks LOG_RANK leaves out)
  WorldInfo world;
  std::unique_ptr<ProcessGroup> process_group;
  DeterminismRecord determinism;
  c10::Device device = c10::Device(c10::kCPU);
  double peak_flops = 0;  // for MFU: measured sgemm on CPU, the device table on CUDA; 0 unknown
};

struct RunContextOptions {
  bool measure_peak_flops = true;  // tests skip the start-up sgemm measurement
};

// Steps 1-4, the console being `log`. Throws ConfigError (exit 2) for a bad environment, device
// or determinism setting. Writes no file.
RunContext build_run_context(const Config& config, std::ostream& log,
                             const RunContextOptions& options = {});

// "auto" -> cuda when available, else cpu. Throws ConfigError for "cuda" without CUDA.
c10::Device resolve_device(DeviceChoice choice);

}  // namespace titan
