#include "app/run_context.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <filesystem>

#include "config/loader.h"
#include "metrics/device_stats.h"
#include "util/error.h"
#include "util/files.h"

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
  c.log = &log;
  c.world = world_from_environment();
  c.process_group = make_process_group(c.world);
  c.determinism =
      make_deterministic(c.config, c.process_group->rank(), c.process_group->size(), log);
  c.config.debug.seed = static_cast<int64_t>(c.determinism.seed);  // config.toml repeats the run
  c.device = resolve_device(c.config.training.device);
  if (options.measure_peak_flops) c.peak_flops = peak_flops(c.device);
  return c;
}

void open_output_sinks(RunContext& c) {
  const std::string& folder = c.config.job.dump_folder;
  create_dump_folder(folder);
  c.dump_folder_lock = std::make_unique<RunLock>(folder);
  write_file_atomically(folder + "/config.toml", to_toml(c.config));
  c.metrics = std::make_unique<JsonlWriter>(folder + "/metrics.jsonl", c.resume_step);
  FingerprintHeader header{c.device.is_cuda() ? "cuda" : "cpu", hardware_name(c.device),
                           config_hash(c.config), c.determinism};
  c.fingerprint =
      std::make_unique<FingerprintLog>(folder + "/fingerprint.log", header, c.resume_step);
}

}  // namespace titan
