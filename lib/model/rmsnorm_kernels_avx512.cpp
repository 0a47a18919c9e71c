// rmsnorm_kernels_simd.h at 16 floats a vector. Compiled with -mavx2 -mfma -mavx512f on x86-64
// (lib/CMakeLists.txt); runs only when the CPU has them (util/cpu_features.h).
#include "model/rmsnorm_kernels.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include "model/rmsnorm_kernels_simd.h"

namespace titan::rmsnorm_kernels::avx512 {

using Built = Kernels<simd::Avx512>;

void forward(const float* x, const float* w, float eps, int64_t rows, int64_t C, float* y,
             float* rstd) {
  Built::forward(x, w, eps, rows, C, y, rstd);
}

void backward_input(const float* x, const float* w, const float* rstd, const float* gy,
                    int64_t rows, int64_t C, float* dx) {
  Built::backward_input(x, w, rstd, gy, rows, C, dx);
}

void backward_weight_chunk(const float* x, const float* rstd, const float* gy, int64_t rows,
                           int64_t C, float* dw_part) {
  Built::backward_weight_chunk(x, rstd, gy, rows, C, dw_part);
}

}  // namespace titan::rmsnorm_kernels::avx512

#else  // not built for it (not x86-64): the CPU check says false, so these are never called

#include <cstdlib>

namespace titan::rmsnorm_kernels::avx512 {

void forward(const float*, const float*, float, int64_t, int64_t, float*, float*) { std::abort(); }
void backward_input(const float*, const float*, const float*, const float*, int64_t, int64_t,
                    float*) {
  std::abort();
}
void backward_weight_chunk(const float*, const float*, const float*, int64_t, int64_t, float*) {
  std::abort();
}

}  // namespace titan::rmsnorm_kernels::avx512
#endif
