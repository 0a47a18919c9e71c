#include "metrics/device_stats.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#ifdef TITAN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "util/error.h"
#include "util/memory_limit.h"
#include "util/onednn_sgemm.h"

namespace titan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double measure_cpu_matmul_flops() {
  const int64_t n = 1024;
  // Constant operands: an sgemm's time does not depend on the values, and drawing them would move
  // the run's seeded generator before the model's initialization (different bits with
  // TITAN_CPU_PEAK_FLOPS set or not).
  auto a = at::full({n, n}, 1.0F / static_cast<float>(n)), b = at::full({n, n}, 0.5F);
  // On the library the linear layers run on (debug.cpu_linear), so that MFU compares like with
  // like.
  const bool onednn = linear_backend() == LinearBackend::kOnednn && onednn_library().loaded;
  auto c = at::empty({n, n});
  auto multiply = [&] {
    if (onednn)
      onednn_sgemm(false, false, n, n, n, a.data_ptr<float>(), n, b.data_ptr<float>(), n,
                   c.data_ptr<float>(), n);
    else
      at::mm_out(c, a, b);
  };
  multiply();  // warm up BLAS threads and caches
  // The best of 10 (~110 ms on 2 cores): on a loaded machine the best of 3 ranged 172-196
  // GFLOP/s against 189-195 for the best of 10, and MFU inherited that spread.
  double best = 0;
  for (int rep = 0; rep < 10; ++rep) {
    auto start = std::chrono::steady_clock::now();
    multiply();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::max(best, 2.0 * n * n * n / took.count());
  }
  return best;
}

}  // namespace

MemoryReading read_and_reset_peak_memory(const c10::Device& device) {
#ifdef TITAN_WITH_CUDA
  if (device.is_cuda()) {
    const int index = device.has_index() ? device.index() : 0;
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    double reserved = static_cast<double>(stats.reserved_bytes[0].peak);
    c10::cuda::CUDACachingAllocator::resetPeakStats(index);
    return {reserved / kGiB, 100.0 * reserved / device_memory_bytes(device)};
  }
#endif
  const double rss = peak_rss_bytes();
  return {rss / kGiB, 100.0 * rss / device_memory_bytes(device)};
}

double peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // ru_maxrss is in KiB on Linux
}

double current_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

CpuUsage cpu_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  return {seconds(u.ru_utime), seconds(u.ru_stime), static_cast<double>(u.ru_minflt)};
}

double device_memory_bytes(const c10::Device& device) {
#ifdef TITAN_WITH_CUDA
  if (device.is_cuda()) {
    return static_cast<double>(
        at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0)->totalGlobalMem);
  }
#endif
  return process_memory_limit().bytes;
}

std::string device_memory_source(const c10::Device& device) {
  if (device.is_cuda()) return device_name(device);
  return process_memory_limit().source;
}

double flops_per_token(const ModelArgs& args, int64_t seq_len) {
  double non_embedding =
      static_cast<double>(args.num_active_params() - args.num_embedding_params());
  return 6.0 * non_embedding + 6.0 * args.n_layers * args.n_heads * args.attention_head_dims() *
                                   static_cast<double>(seq_len);
}

double peak_flops(const c10::Device& device) {
#ifdef TITAN_WITH_CUDA
  if (device.is_cuda()) {
    // bf16 dense peaks, the values torchtitan uses.
    const std::vector<std::pair<std::string, double>> table = {
        {"H200", 989e12}, {"H100 NVL", 835e12}, {"H100 PCIe", 756e12}, {"H100", 989e12},
        {"H20", 148e12},  {"B200", 2.25e15},    {"A100", 312e12},      {"L40S", 362e12}};
    std::string name = device_name(device);
    for (auto& [key, value] : table) {
      if (name.find(key) != std::string::npos) return value;
    }
    return 312e12;
  }
#endif
  const double given = cpu_peak_flops_override();
  return given > 0 ? given : measure_cpu_matmul_flops();
}

double cpu_peak_flops_override() {
  const char* text = std::getenv("TITAN_CPU_PEAK_FLOPS");
  if (!text) return 0;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(value) || value <= 0) {
    throw ConfigError("TITAN_CPU_PEAK_FLOPS",
                      fmt::format("\"{}\" is not a positive number of FLOP/s", text),
                      "set it to the CPU's peak (e.g. 2.5e11), or unset it to measure at start");
  }
  return value;
}

std::string hardware_name(const c10::Device& device) {
  if (!device.is_cpu()) return device_name(device);
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown cpu";
}

std::string device_name(const c10::Device& device) {
#ifdef TITAN_WITH_CUDA
  if (device.is_cuda()) {
    return at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0)->name;
  }
#endif
  return fmt::format("cpu ({} cores)", std::thread::hardware_concurrency());
}

}  // namespace titan
