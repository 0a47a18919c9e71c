// The determinism controller: the one place that owns every determinism-related setting.
//
// make_deterministic() is called once, before any tensor or CUDA work. It seeds, sets threads,
// switches deterministic algorithms, cuDNN and cuBLAS settings from [debug], and returns a
// record of what it set, which the run logs as one [determinism] block.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "config/config.h"
#include "util/blas_threads.h"

namespace titan {

struct DeterminismRecord {
  uint64_t seed = 0;
  bool seed_was_drawn = false;  // [debug] seed was unset
  bool deterministic = false;   // at::Context deterministic algorithms, read back
  bool deterministic_warn_only = false;
  bool cudnn_deterministic = false;  // read back from at::Context
  bool cudnn_benchmark = false;
  std::string cublas_workspace_config;  // the variable's value in the environment, "" if unset
  std::string
      cublas_workspace_origin;  // "set by titan-train", "kept from the environment", "unset"
  std::optional<bool> fill_uninitialized_memory;  // libtorch >= 2.2; left at PyTorch's default
  int64_t cpu_threads = 0;
  bool blas_threads_set = false;  // OpenBLAS pool sized too
  BlasKernels blas_kernels;       // util/blas_threads.h
  int64_t rank = 0;
  int64_t world_size = 1;
};

// The cuBLAS workspace settings PyTorch accepts as deterministic.
inline const char* const kDeterministicCublasConfigs[] = {":4096:8", ":16:8"};

// Requires: no CUDA context yet. Seeds the CPU generator and every CUDA device's generator with
// the [debug] seed (drawn and reported when unset: a multi-process run sets it first, to the
// seed its ranks agreed on, so that every rank initializes identical weights); sets ATen intra-op
// and OpenBLAS threads to training.cpu_threads (0 = all cores); allows titan's fused CPU kernels
// unless debug.cpu_kernels = "aten" (util/cpu_features.h). With debug.deterministic:
// deterministic algorithms (warn-only per deterministic_warn_only), cuDNN deterministic and no
// benchmark, and CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment unless the user set a valid
// value. Throws ConfigError (exit 2) for an invalid CUBLAS_WORKSPACE_CONFIG. With warn-only,
// installs a warning handler that logs each op without a deterministic implementation once, to
// `log`.
DeterminismRecord make_deterministic(const Config& config, int64_t rank, int64_t world_size,
                                     std::ostream& log);

// A fresh random seed in [0, 2^62) (a positive TOML integer when written back).
uint64_t draw_seed();

// The [determinism] block for the start of the log, one setting per line.
std::string format_determinism_block(const DeterminismRecord& record, const std::string& device);

// "put_" from libtorch's "put_ does not have a deterministic implementation, ..." error or
// warning text; nullopt for any other message.
std::optional<std::string> nondeterministic_op(const std::string& message);

// Throws CheckFailure (exit code 3) naming the step, the op and the warn-only switch when `error`
// is libtorch's "no deterministic implementation" error; returns otherwise.
void raise_if_nondeterministic_op(const std::exception& error, int64_t step);

// Runs fn(); an op without a deterministic implementation inside it becomes a CheckFailure
// (see raise_if_nondeterministic_op). Other errors pass through unchanged.
template <class Fn>
auto fail_on_nondeterministic_op(int64_t step, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    raise_if_nondeterministic_op(e, step);
    throw;
  }
}

// The number of cores this process may run on (sched_getaffinity, e.g. under Slurm).
int64_t available_cores();

}  // namespace titan
