// swiglu_kernels_simd.h at 8 floats a vector. Compiled with -mavx2 -mfma on x86-64
// (lib/CMakeLists.txt); runs only when the CPU has them (util/cpu_features.h).
#include "model/swiglu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include "model/swiglu_kernels_simd.h"

namespace titan::swiglu_kernels::avx2 {

using Built = Kernels<simd::Avx2>;

void forward(const float* a, const float* b, int64_t n, float* out) {
  Built::forward(a, b, n, out);
}

void backward(const float* a, const float* b, const float* g, int64_t n, float* da, float* db) {
  Built::backward(a, b, g, n, da, db);
}

}  // namespace titan::swiglu_kernels::avx2

#else  // not built for it (not x86-64): the CPU check says false, so these are never called

#include <cstdlib>

namespace titan::swiglu_kernels::avx2 {

void forward(const float*, const float*, int64_t, float*) { std::abort(); }
void backward(const float*, const float*, const float*, int64_t, float*, float*) { std::abort(); }

}  // namespace titan::swiglu_kernels::avx2
#endif
