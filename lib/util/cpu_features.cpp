// Built for the baseline ISA: it runs before anything built for AVX2 or AVX-512.
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

bool cpu_has_avx512() {
#if defined(__x86_64__)
  // GCC's check includes the OS's: it says false unless XCR0 enables the AVX-512 state.
  static const bool supported = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

namespace {
std::atomic<FusedKernels> fused_choice{FusedKernels::kWidest};
}  // namespace

bool fused_kernels_enabled() {
  return fused_choice.load() != FusedKernels::kOff && cpu_has_avx2_fma();
}

VectorIsa fused_kernel_isa() {
  return fused_choice.load() == FusedKernels::kWidest && cpu_has_avx512() ? VectorIsa::kAvx512
                                                                          : VectorIsa::kAvx2;
}

void set_fused_kernels(FusedKernels choice) { fused_choice.store(choice); }

}  // namespace titan
