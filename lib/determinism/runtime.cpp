#include "determinism/runtime.h"

#include "util/blas_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <sched.h>
#include <torch/utils.h>

#include <random>
#include <thread>

namespace titan {

int64_t available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

RuntimeSettings apply_runtime_settings(const Config& config) {
  RuntimeSettings s;
  s.cpu_threads = config.training.cpu_threads > 0 ? config.training.cpu_threads : available_cores();
  at::set_num_threads(static_cast<int>(s.cpu_threads));
  s.blas_threads_set = set_blas_threads(static_cast<int>(s.cpu_threads));

  if (config.debug.seed) {
    s.seed = static_cast<uint64_t>(*config.debug.seed);
  } else {
    std::random_device device;
    s.seed = (static_cast<uint64_t>(device()) << 31) ^ device();
    s.seed &= (1ull << 62) - 1;  // stays a positive TOML integer when written back
    s.seed_was_drawn = true;
  }
  torch::manual_seed(s.seed);

  s.deterministic = config.debug.deterministic;
  s.deterministic_warn_only = config.debug.deterministic_warn_only;
  at::globalContext().setDeterministicAlgorithms(s.deterministic, s.deterministic_warn_only);
  return s;
}

}  // namespace titan
