#include "determinism/determinism.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <sched.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <ostream>
#include <random>
#include <set>
#include <thread>

#include "config/limits.h"
#include "util/blas_threads.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/memory_limit.h"
#include "util/onednn_sgemm.h"

namespace titan {
namespace {

constexpr const char* kNoDeterministicImpl = " does not have a deterministic implementation";

// Logs each op without a deterministic implementation once; other warnings go to the handler
// that was installed before.
class OncePerOpWarningHandler : public c10::WarningHandler {
 public:
  void install(std::ostream& log) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_ = &log;
    seen_.clear();  // a new run logs each op once again
    if (installed_) return;
    previous_ = get_handler();
    set_handler(this);
    installed_ = true;
  }

#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override {
    if (!handle(warning.msg())) previous_->process(warning);
  }
#else
  void process(const c10::SourceLocation& where, const std::string& msg, bool verbatim) override {
    if (!handle(msg)) previous_->process(where, msg, verbatim);
  }
#endif

 private:
  bool handle(const std::string& msg) {
    auto op = nondeterministic_op(msg);
    if (!op) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (seen_.insert(*op).second) {
      *log_ << fmt::format(
                   "[determinism] warning: {} has no deterministic implementation; continuing "
                   "because debug.deterministic_warn_only = true (logged once per op)",
                   *op)
            << std::endl;
    }
    return true;
  }

#if TORCH_VERSION_MAJOR >= 2
  static c10::WarningHandler* get_handler() { return c10::WarningUtils::get_warning_handler(); }
  static void set_handler(c10::WarningHandler* h) { c10::WarningUtils::set_warning_handler(h); }
#else
  static c10::WarningHandler* get_handler() { return c10::Warning::get_warning_handler(); }
  static void set_handler(c10::WarningHandler* h) { c10::Warning::set_warning_handler(h); }
#endif

  std::mutex mutex_;
  std::ostream* log_ = nullptr;
  c10::WarningHandler* previous_ = nullptr;
  bool installed_ = false;
  std::set<std::string> seen_;
};

OncePerOpWarningHandler& warning_handler() {
  static OncePerOpWarningHandler handler;
  return handler;
}

uint64_t resolve_seed(const Config& config, bool& drawn) {
  drawn = !config.debug.seed.has_value();
  return drawn ? draw_seed() : static_cast<uint64_t>(*config.debug.seed);
}

// CUBLAS_WORKSPACE_CONFIG must be in the environment before cuBLAS creates its first handle.
void configure_cublas_workspace(bool deterministic, DeterminismRecord& r) {
  const char* current = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  r.cublas_workspace_config = current ? current : "";
  r.cublas_workspace_origin = current ? "kept from the environment" : "unset";
  if (!deterministic) return;
  if (!current) {
    setenv("CUBLAS_WORKSPACE_CONFIG", kDeterministicCublasConfigs[0], 1);
    r.cublas_workspace_config = kDeterministicCublasConfigs[0];
    r.cublas_workspace_origin = "set by titan-train";
    return;
  }
  for (const char* valid : kDeterministicCublasConfigs) {
    if (r.cublas_workspace_config == valid) return;
  }
  throw ConfigError("environment variable CUBLAS_WORKSPACE_CONFIG",
                    fmt::format("\"{}\" does not make cuBLAS deterministic; allowed values: "
                                "\":4096:8\", \":16:8\"",
                                r.cublas_workspace_config),
                    "unset it (titan-train then sets :4096:8) or set one of the allowed values");
}

// Far more threads than cores only thrashes (10,000 made a 2-core machine unresponsive), but a
// few times more is allowed so a small machine can repeat a bigger one's thread count.
void check_cpu_threads(const Config& config) {
  const int64_t threads = config.training.cpu_threads;
  const int64_t cores = available_cores();
  const int64_t cap = std::max(limits::kMinThreadCap, limits::kThreadsPerCore * cores);
  if (threads <= cap) return;
  throw ConfigError(
      "training.cpu_threads",
      fmt::format("{} is more than this machine allows: it must be <= {} ({} x the {} "
                  "cores this process may use, and at least {})",
                  threads, cap, limits::kThreadsPerCore, cores, limits::kMinThreadCap),
      "set cpu_threads = 0 for one thread per core");
}

}  // namespace

int64_t available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

std::optional<std::string> nondeterministic_op(const std::string& message) {
  auto at = message.find(kNoDeterministicImpl);
  if (at == std::string::npos) return std::nullopt;
  auto start = message.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return message.substr(start, at - start);
}

void raise_if_nondeterministic_op(const std::exception& error, int64_t step) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  auto op = nondeterministic_op(c10_error ? c10_error->what_without_backtrace() : error.what());
  if (!op) return;
  throw CheckFailure(
      fmt::format("step {}: {} has no deterministic implementation and debug.deterministic = true",
                  step, *op),
      "set debug.deterministic_warn_only = true to log a warning instead, or debug.deterministic = "
      "false");
}

uint64_t draw_seed() {
  std::random_device device;
  uint64_t seed = (static_cast<uint64_t>(device()) << 31) ^ device();
  return seed & ((1ull << 62) - 1);  // stays a positive TOML integer when written back
}

DeterminismRecord make_deterministic(const Config& config, int64_t rank, int64_t world_size,
                                     std::ostream& log) {
  const auto& d = config.debug;
  DeterminismRecord r;
  r.rank = rank;
  r.world_size = world_size;
  configure_cublas_workspace(d.deterministic, r);  // first: it may refuse the run

  // The kernels decide bits: chosen here, before any model or optimizer is built.
  set_fused_kernels(d.cpu_kernels == CpuKernels::kAten        ? FusedKernels::kOff
                    : d.cpu_kernels == CpuKernels::kFusedAvx2 ? FusedKernels::kAvx2Only
                                                              : FusedKernels::kWidest);
  set_linear_backend(d.cpu_linear == CpuLinear::kOnednn ? LinearBackend::kOnednn
                                                        : LinearBackend::kAten);
  check_cpu_threads(config);
  r.cpu_threads = config.training.cpu_threads > 0 ? config.training.cpu_threads : available_cores();
  check_thread_headroom(r.cpu_threads);
  at::set_num_threads(static_cast<int>(r.cpu_threads));
  r.blas_threads_set = set_blas_threads(static_cast<int>(r.cpu_threads));
  r.blas_kernels = openblas_kernels();

  r.seed = resolve_seed(config, r.seed_was_drawn);
  torch::manual_seed(r.seed);  // the CPU generator and every CUDA device's

  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(d.deterministic, d.deterministic_warn_only);
  if (d.deterministic) {
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
  }
  if (d.deterministic && d.deterministic_warn_only) warning_handler().install(log);
  r.deterministic = ctx.deterministicAlgorithms();
  r.deterministic_warn_only = ctx.deterministicAlgorithmsWarnOnly();
  r.cudnn_deterministic = ctx.deterministicCuDNN();
  r.cudnn_benchmark = ctx.benchmarkCuDNN();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  r.fill_uninitialized_memory = ctx.deterministicFillUninitializedMemory();
#endif
  return r;
}

std::string format_determinism_block(const DeterminismRecord& r, const std::string& device) {
  auto line = [](const std::string& key, const std::string& value) {
    return fmt::format("[determinism] {:<28} {}\n", key, value);
  };
  auto yes_no = [](bool b) { return std::string(b ? "true" : "false"); };
  std::string out;
  out += line("seed", fmt::format("{}{}", r.seed,
                                  r.seed_was_drawn ? " (drawn; set debug.seed to repeat)" : ""));
  out += line("deterministic_algorithms", yes_no(r.deterministic));
  out += line("deterministic_warn_only", yes_no(r.deterministic_warn_only));
  out += line("cudnn.deterministic", yes_no(r.cudnn_deterministic));
  out += line("cudnn.benchmark", yes_no(r.cudnn_benchmark));
  out += line("CUBLAS_WORKSPACE_CONFIG",
              r.cublas_workspace_config.empty()
                  ? std::string("unset")
                  : fmt::format("{} ({})", r.cublas_workspace_config, r.cublas_workspace_origin));
  out +=
      line("fill_uninitialized_memory",
           r.fill_uninitialized_memory ? yes_no(*r.fill_uninitialized_memory) + " (PyTorch default)"
                                       : std::string("n/a (libtorch < 2.2)"));
  out += line("cpu_threads",
              fmt::format("{} ({})", r.cpu_threads,
                          r.blas_threads_set ? "OpenBLAS matched" : "the BLAS is not OpenBLAS"));
  if (!r.blas_kernels.core.empty()) out += line("blas_kernels", r.blas_kernels.description());
  out += line("device", device);
  out += line("world_size", fmt::format("{} (rank {})", r.world_size, r.rank));
  if (r.deterministic)
    out += "[determinism] deterministic algorithms enabled (expect some slowdown)\n";
  return out;
}

}  // namespace titan
