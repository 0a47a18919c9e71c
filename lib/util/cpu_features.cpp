// Built for the baseline ISA: it runs before anything built for AVX2.
#include "util/cpu_features.h"

#include <atomic>

namespace titan {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

namespace {
std::atomic<bool> fused_allowed{true};
}  // namespace

bool fused_kernels_enabled() { return fused_allowed.load() && cpu_has_avx2_fma(); }

void set_fused_kernels_allowed(bool allowed) { fused_allowed.store(allowed); }

}  // namespace titan
