// adamw_kernels_simd.h at 8 floats a vector. Compiled with -mavx2 -mfma on x86-64
// (lib/CMakeLists.txt); runs only when the CPU has them (util/cpu_features.h).
#include "optim/adamw_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include "optim/adamw_kernels_simd.h"

namespace titan::adamw_kernels::avx2 {

using Built = Kernels<simd::Avx2>;

void update(float* p, const float* g, float* m, float* v, int64_t n, const StepConstants& c) {
  Built::update(p, g, m, v, n, c);
}

Squares update_measured(float* p, const float* g, float* m, float* v, int64_t n,
                        const StepConstants& c) {
  return Built::update_measured(p, g, m, v, n, c);
}

}  // namespace titan::adamw_kernels::avx2

#else  // not built for it (not x86-64): the CPU check says false, so these are never called

#include <cstdlib>

namespace titan::adamw_kernels::avx2 {

void update(float*, const float*, float*, float*, int64_t, const StepConstants&) { std::abort(); }
Squares update_measured(float*, const float*, float*, float*, int64_t, const StepConstants&) {
  std::abort();
}

}  // namespace titan::adamw_kernels::avx2
#endif
