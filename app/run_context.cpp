#include "app/run_context.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <streambuf>

#include "config/loader.h"
#include "determinism/determinism.h"
#include "metrics/device_stats.h"
#include "model/causal_attention.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "optim/optimizer.h"
#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

void create_dump_folder(const std::string& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw ConfigError("job.dump_folder", fmt::format("cannot create {}: {}", folder, ec.message()),
                      "choose a writable folder");
  }
}

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

void open_output_sinks(RunContext& c) {
  const std::string& folder = c.config.job.dump_folder;
  const int64_t rank = c.world.rank;
  // Rank 0 holds the run's lock; the other ranks write nothing before it has it, so that a run
  // refused for a locked folder leaves the other run's per-rank files alone.
  std::string refusal;
  if (rank == 0) {
    try {
      create_dump_folder(folder);
      c.dump_folder_lock = std::make_unique<RunLock>(folder);
    } catch (const ConfigError& e) {
      if (c.world.world_size == 1) throw;
      refusal = e.where() + "\n" + e.message() + "\n" + e.hint();
    }
  }
  if (c.world.world_size > 1) refusal = c.process_group->broadcast("dump_folder_lock", refusal);
  if (!refusal.empty()) {
    const auto lines = split_list(refusal, '\n');
    throw ConfigError(lines.at(0), (rank == 0 ? "" : "(rank 0) ") + lines.at(1), lines.at(2));
  }
  if (rank == 0) {
    write_file_atomically(folder + "/config.toml", to_toml(c.config));
    c.metrics = std::make_unique<JsonlWriter>(folder + "/metrics.jsonl", c.resume_step);
  }
  const ModelArgs args = model_args_for_flavor(c.config.model.flavor);
  FingerprintHeader header{
      c.device.is_cuda() ? "cuda" : "cpu",
      hardware_name(c.device),
      config_hash(c.config),
      c.determinism,
      attention_kernel_name(attention_kernel_for(args.head_dim(), at::kFloat, c.device)),
      swiglu_kernel_name(swiglu_kernel_for(at::kFloat, c.device)),
      rms_norm_kernel_name(rms_norm_kernel_for(args.dim, at::kFloat, c.device)),
      adamw_kernel_name(adamw_kernel_for(c.device))};
  c.fingerprint = std::make_unique<FingerprintLog>(
      folder + "/" + rank_file_name("fingerprint.log", rank), header, c.resume_step);
}

}  // namespace titan
