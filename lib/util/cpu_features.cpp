// Built for the baseline ISA: it runs before anything built for AVX2.
#include "util/cpu_features.h"

namespace titan {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

}  // namespace titan
