#include "metrics/machine.h"

#include <ATen/Context.h>
#include <ATen/Version.h>
#include <fmt/format.h>

#include <cstdlib>

#ifdef TITAN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "metrics/device_stats.h"

namespace titan {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : "unset";
}

// The instruction sets titan's kernels, ATen's and OpenBLAS's choose between.
std::string cpu_isa() {
#if defined(__x86_64__)
  std::string out = "x86-64";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out += " avx2";
  if (__builtin_cpu_supports("fma")) out += " fma";
  if (__builtin_cpu_supports("avx512f")) out += " avx512f";
  if (__builtin_cpu_supports("avx512bw")) out += " avx512bw";
  if (__builtin_cpu_supports("avx512vl")) out += " avx512vl";
  return out;
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "other";
#endif
}

// The CPU code ATen's dispatch chose (from the CPU, or ATEN_CPU_CAPABILITY), as its build
// configuration reports it ("CPU capability usage: AVX2").
std::string aten_capability() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t begin = at + key.size();
  return config.substr(begin, config.find('\n', begin) - begin);
}

}  // namespace

std::string machine_details(const c10::Device& device) {
  std::string out;
  out += fmt::format("cpu \"{}\"\n", hardware_name(c10::Device(c10::kCPU)));
  out += fmt::format("cpu_isa {}\n", cpu_isa());
  out += fmt::format("aten_cpu_capability {}\n", aten_capability());
  out += fmt::format("ATEN_CPU_CAPABILITY {}\n", environment("ATEN_CPU_CAPABILITY"));
  out += fmt::format("OPENBLAS_CORETYPE {}\n", environment("OPENBLAS_CORETYPE"));
#ifdef TITAN_WITH_CUDA
  if (device.is_cuda()) {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    out += fmt::format("cuda_runtime {}.{}\n", runtime / 1000, (runtime % 1000) / 10);
    out += fmt::format("cudnn {}\n", at::globalContext().versionCuDNN());
  }
#else
  (void)device;
#endif
  return out;
}

}  // namespace titan
