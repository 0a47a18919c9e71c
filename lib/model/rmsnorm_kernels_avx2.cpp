// Compiled with -mavx2 -mfma on x86-64 (lib/CMakeLists.txt); see attention_kernels_avx2.cpp for
// why everything but the header's entry points has internal linkage.
#include "model/rmsnorm_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cmath>

namespace titan::rmsnorm_kernels {
namespace {

constexpr int64_t kLanes = 8;  // floats in a __m256

float horizontal_sum(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float row_sum_of_squares(const float* x, int64_t C) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t c = 0; c < C; c += kLanes) {
    const __m256 v = _mm256_loadu_ps(x + c);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  return horizontal_sum(acc);
}

// sum over c of gy[c] * w[c] * x[c] (x_hat without its row's rstd).
float row_gradient_dot(const float* x, const float* w, const float* gy, int64_t C) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t c = 0; c < C; c += kLanes)
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(gy + c), _mm256_loadu_ps(w + c)),
                          _mm256_loadu_ps(x + c), acc);
  return horizontal_sum(acc);
}

}  // namespace

void forward(const float* x, const float* w, float eps, int64_t rows, int64_t C, float* y,
             float* rstd) {
  for (int64_t n = 0; n < rows; ++n) {
    const float* xr = x + n * C;
    const float r = 1.0f / std::sqrt(row_sum_of_squares(xr, C) / static_cast<float>(C) + eps);
    rstd[n] = r;
    const __m256 vr = _mm256_set1_ps(r);
    for (int64_t c = 0; c < C; c += kLanes)
      _mm256_storeu_ps(y + n * C + c, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + c), vr),
                                                    _mm256_loadu_ps(w + c)));
  }
}

void backward_input(const float* x, const float* w, const float* rstd, const float* gy,
                    int64_t rows, int64_t C, float* dx) {
  for (int64_t n = 0; n < rows; ++n) {
    const float *xr = x + n * C, *gr = gy + n * C;
    const float r = rstd[n];
    // mean(gy w x_hat) = r * mean(gy w x); then dx = r * (gy w - x_hat * that).
    const float mean_dot = r * row_gradient_dot(xr, w, gr, C) / static_cast<float>(C);
    const __m256 vr = _mm256_set1_ps(r), vmean = _mm256_set1_ps(mean_dot);
    for (int64_t c = 0; c < C; c += kLanes) {
      const __m256 x_hat = _mm256_mul_ps(_mm256_loadu_ps(xr + c), vr);
      const __m256 gw = _mm256_mul_ps(_mm256_loadu_ps(gr + c), _mm256_loadu_ps(w + c));
      _mm256_storeu_ps(dx + n * C + c, _mm256_mul_ps(vr, _mm256_fnmadd_ps(x_hat, vmean, gw)));
    }
  }
}

void backward_weight_chunk(const float* x, const float* rstd, const float* gy, int64_t rows,
                           int64_t C, float* dw_part) {
  for (int64_t c = 0; c < C; c += kLanes) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t n = 0; n < rows; ++n) {
      const __m256 x_hat = _mm256_mul_ps(_mm256_loadu_ps(x + n * C + c), _mm256_set1_ps(rstd[n]));
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(gy + n * C + c), x_hat, acc);
    }
    _mm256_storeu_ps(dw_part + c, acc);
  }
}

}  // namespace titan::rmsnorm_kernels

#else  // not built for AVX2 (not x86-64): cpu_has_avx2_fma() is false, so these are never called

#include <cstdlib>

namespace titan::rmsnorm_kernels {

void forward(const float*, const float*, float, int64_t, int64_t, float*, float*) { std::abort(); }
void backward_input(const float*, const float*, const float*, const float*, int64_t, int64_t,
                    float*) {
  std::abort();
}
void backward_weight_chunk(const float*, const float*, const float*, int64_t, int64_t, float*) {
  std::abort();
}

}  // namespace titan::rmsnorm_kernels
#endif
