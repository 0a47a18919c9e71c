#include "train/run_context.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <ostream>
#include <streambuf>

#include "determinism/determinism.h"
#include "metrics/device_stats.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

// The console of a rank LOG_RANK leaves out: accepts and drops everything (and stays good, so
// the Trainer's check for a failed console stays quiet).
std::ostream& silent_stream() {
  struct DroppingBuffer : std::streambuf {
    int overflow(int c) override { return traits_type::not_eof(c); }
  };
  static DroppingBuffer buffer;
  static std::ostream stream(&buffer);
  return stream;
}

std::string format_rank_line(const RunContext& c) {
  const WorldInfo& w = c.world;
  return fmt::format(
      "[titan] rank {} of {} (local rank {} of {}, launcher {}): {} over {}:{}, {} CPU threads; "
      "console lines from rank {} (LOG_RANK)\n",
      w.rank, w.world_size, w.local_rank, w.local_world_size, w.launcher,
      c.process_group->backend(), w.master_addr, w.master_port,
      c.config.training.cpu_threads == 0 ? std::string("all")
                                         : std::to_string(c.config.training.cpu_threads),
      join_integers(w.log_ranks, ","));
}

}  // namespace

c10::Device resolve_device(DeviceChoice choice) {
  const bool cuda = torch::cuda::is_available();
  switch (choice) {
    case DeviceChoice::kCpu:
      return c10::Device(c10::kCPU);
    case DeviceChoice::kAuto:
      return cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    case DeviceChoice::kCuda:
      if (cuda) return c10::Device(c10::kCUDA, 0);
      throw ConfigError(
          "training.device", "\"cuda\" was requested but CUDA is not available",
          "use device = \"cpu\" or \"auto\", or a CUDA build of libtorch on a GPU machine");
  }
  throw std::logic_error("unhandled DeviceChoice");
}

RunContext build_run_context(const Config& config, std::ostream& log,
                             const RunContextOptions& options) {
  RunContext c;
  c.config = config;
  c.world = world_from_environment();
  c.log = c.world.logs_console() ? &log : &silent_stream();
  data_parallel_degree(c.config, c.world.world_size);  // refuses a bad split before the rendezvous
  if (c.world.world_size > 1 && c.config.training.device != DeviceChoice::kCpu &&
      torch::cuda::is_available()) {
    throw ConfigError("training.device",
                      "multi-process training on CUDA (NCCL) is not built into this titan-train",
                      "use training.device = \"cpu\" (Gloo) for several processes, or one "
                      "process per GPU run");
  }
  auto& threads = c.config.training.cpu_threads;
  if (threads == 0 && c.world.local_world_size > 1) {
    // Processes on one machine share its cores (torchrun sets OMP_NUM_THREADS=1 for this).
    threads = std::max<int64_t>(1, available_cores() / c.world.local_world_size);
  }
  c.process_group = make_process_group(c.world, c.config.comm);
  if (c.world.world_size > 1) log << format_rank_line(c) << std::flush;
  const bool seed_unset = !c.config.debug.seed.has_value();
  if (c.world.world_size > 1 && seed_unset) {
    // Rank 0 draws; every rank initializes the same weights from it.
    const std::string drawn = c.process_group->broadcast("seed", std::to_string(draw_seed()));
    c.config.debug.seed = std::stoll(drawn);
  }
  c.determinism =
      make_deterministic(c.config, c.process_group->rank(), c.process_group->size(), *c.log);
  c.determinism.seed_was_drawn = seed_unset;
  c.config.debug.seed = static_cast<int64_t>(c.determinism.seed);  // config.toml repeats the run
  c.device = resolve_device(c.config.training.device);
  if (options.measure_peak_flops) c.peak_flops = peak_flops(c.device);
  return c;
}

}  // namespace titan
