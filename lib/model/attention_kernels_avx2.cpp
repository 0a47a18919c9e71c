// attention_kernels_simd.h at 8 floats a vector. Compiled with -mavx2 -mfma on x86-64
// (lib/CMakeLists.txt); runs only when the CPU has them (util/cpu_features.h).
#include "model/attention_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include "model/attention_kernels_simd.h"

namespace titan::attention_kernels::avx2 {

using Built = Kernels<simd::Avx2>;

void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* row_max, float* inverse_sums, float* scratch) {
  Built::forward_head(q, k, v, scale, T, D, out, row_max, inverse_sums, scratch);
}

void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* row_max,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch) {
  Built::backward_head(q, k, v, out, grad_out, row_max, inverse_sums, scale, T, D, dq, dk, dv,
                       scratch);
}

}  // namespace titan::attention_kernels::avx2

#else  // not built for it (not x86-64): the CPU check says false, so these are never called

#include <cstdlib>

namespace titan::attention_kernels::avx2 {

void forward_head(Rows, Rows, Rows, float, int64_t, int64_t, MutableRows, float*, float*, float*) {
  std::abort();
}

void backward_head(Rows, Rows, Rows, Rows, Rows, const float*, const float*, float, int64_t,
                   int64_t, MutableRows, MutableRows, MutableRows, float*) {
  std::abort();
}

}  // namespace titan::attention_kernels::avx2
#endif
