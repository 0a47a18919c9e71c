#include "train/run_context.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <ostream>
#include <streambuf>

#ifdef TITAN_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

#include "config/run_folder.h"
#include "determinism/determinism.h"
#include "metrics/device_stats.h"
#include "train/rank_agreement.h"
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

// Makes c.device the process's current CUDA device (so that NCCL, cuBLAS and the caching
// allocator work there, not on device 0), and with several ranks checks that no two of them
// train on one GPU: ConfigError naming both.
void use_cuda_device(const RunContext& c) {
#ifdef TITAN_WITH_CUDA
  c10::cuda::set_device(c.device.index());
  if (c.process_group->size() == 1) return;
  char bus_id[32] = {};
  const bool known = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), c.device.index()) == cudaSuccess;
  const std::string id =
      fmt::format("{} GPU {}", host_name(), known ? std::string(bus_id) : c.device.str());
  const auto ids = c.process_group->gather("cuda_devices", id);
  const std::string conflict = c.process_group->broadcast(
      "cuda_devices_verdict", c.process_group->rank() == 0 ? shared_device_conflict(ids) : "");
  if (!conflict.empty()) {
    throw ConfigError("training.device", conflict + ": two ranks would share one GPU",
                      "start at most one process per GPU, and give each its own (LOCAL_RANK, "
                      "CUDA_VISIBLE_DEVICES)");
  }
#else
  (void)c;
#endif
}

}  // namespace

c10::Device resolve_device(DeviceChoice choice, const WorldInfo& world) {
  const bool cuda = torch::cuda::is_available();
  const auto cuda_device = [&] {
    const int64_t index = cuda_device_for(world, static_cast<int64_t>(torch::cuda::device_count()));
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  };
  switch (choice) {
    case DeviceChoice::kCpu:
      return c10::Device(c10::kCPU);
    case DeviceChoice::kAuto:
      return cuda ? cuda_device() : c10::Device(c10::kCPU);
    case DeviceChoice::kCuda:
      if (cuda) return cuda_device();
      throw ConfigError(
          "training.device", "\"cuda\" was requested but CUDA is not available",
          "use device = \"cpu\" or \"auto\", or a CUDA build of libtorch on a GPU machine");
  }
  throw std::logic_error("unhandled DeviceChoice");
}

RunPlan plan_run(const Config& config, MachineCheck machine) {
  RunPlan plan;
  plan.world = world_from_environment();
  data_parallel_degree(config, plan.world.world_size);  // refuses a bad split before the rendezvous
  // Only the device's index is chosen here; CUDA is first used after the determinism settings.
  if (machine == MachineCheck::kThisMachine) {
    plan.device = resolve_device(config.training.device, plan.world);
  } else if (config.training.device == DeviceChoice::kCuda ||
             (config.training.device == DeviceChoice::kAuto && torch::cuda::is_available())) {
    plan.device = c10::Device(c10::kCUDA, 0);
  }
  check_precision_steps(config, plan.world.world_size, plan.device.is_cuda());
  check_batch_invariant(config, plan.world.world_size, plan.device.is_cuda());
  check_seed_checkpoint(config, plan.world.world_size);
  plan.backend =
      choose_backend(config.comm.backend, plan.world.world_size, plan.device, nccl_compiled_in());
  return plan;
}

RunContext build_run_context(const Config& config, std::ostream& log,
                             const RunContextOptions& options) {
  RunContext c;
  c.config = config;
  const RunPlan plan = plan_run(config);
  c.world = plan.world;
  c.log = c.world.logs_console() ? &log : &silent_stream();
  c.errors = options.errors ? options.errors : &log;
  c.console_is_terminal = options.console_is_terminal;
  c.device = plan.device;
  const GroupBackend backend = plan.backend;
  auto& threads = c.config.training.cpu_threads;
  if (threads == 0 && c.world.local_world_size > 1) {
    // Processes on one machine share its cores (torchrun sets OMP_NUM_THREADS=1 for this).
    threads = std::max<int64_t>(1, available_cores() / c.world.local_world_size);
  }
  const std::string flight_recorder = RunFolder(c.config).subfolder(RunSubfolder::kCommTraces) +
                                      "/" + c.config.comm.save_traces_file_prefix;
  if (backend != GroupBackend::kSingle) {
    // Said before the wait: whoever stops a rank waiting here (a launcher, a test) knows it is.
    log << fmt::format(
               "[titan] rank {} of {}: joining the rendezvous at {}:{} (waits up to {} s for "
               "every rank: comm.init_timeout_seconds)\n",
               c.world.rank, c.world.world_size, c.world.master_addr, c.world.master_port,
               c.config.comm.init_timeout_seconds)
        << std::flush;
  }
  c.process_group = make_process_group(c.world, c.config.comm, backend, c.device,
                                       c.config.debug.deterministic, flight_recorder);
  if (backend != GroupBackend::kSingle) log << format_rank_line(c) << std::flush;
  check_ranks_agree(c.config, *c.process_group);
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
  if (c.device.is_cuda()) use_cuda_device(c);
  if (options.measure_peak_flops) c.peak_flops = peak_flops(c.device);
  return c;
}

}  // namespace titan
