// Process-wide runtime settings applied once before any tensor work: seed, CPU threads and the
// deterministic-algorithms switch. Returns what it set so the run can log it.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace titan {

struct RuntimeSettings {
  uint64_t seed = 0;
  bool seed_was_drawn = false;  // true when [debug] seed was unset
  int64_t cpu_threads = 0;      // intra-op threads (and OpenBLAS threads)
  bool blas_threads_set = false;
  bool deterministic = false;
  bool deterministic_warn_only = false;
};

// Requires: called before any model or data is built. Seeds the default generators
// (torch::manual_seed: CPU and every CUDA device), sets ATen intra-op threads to
// training.cpu_threads (0 = all cores) and OpenBLAS to the same count, so the two pools do not
// oversubscribe the cores, and sets at::Context's deterministic algorithms from [debug].
RuntimeSettings apply_runtime_settings(const Config& config);

// The number of cores this process may run on (sched_getaffinity, e.g. under Slurm).
int64_t available_cores();

}  // namespace titan
