// Compiled with -mavx2 -mfma on x86-64 (lib/CMakeLists.txt); see
// lib/model/attention_kernels_avx2.cpp for why everything but the header's entry point has
// internal linkage.
#include "optim/adamw_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cmath>

namespace titan::adamw_kernels {
namespace {

constexpr int64_t kLanes = 8;  // floats in a __m256

struct Vectors {
  __m256 decay, beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bias2, eps, minus_step_size;
};

Vectors vectors_of(const StepConstants& c) {
  return {
      _mm256_set1_ps(c.decay), _mm256_set1_ps(c.beta1),           _mm256_set1_ps(c.one_minus_beta1),
      _mm256_set1_ps(c.beta2), _mm256_set1_ps(c.one_minus_beta2), _mm256_set1_ps(c.sqrt_bias2),
      _mm256_set1_ps(c.eps),   _mm256_set1_ps(c.minus_step_size)};
}

// One vector of lanes; libtorch's order: decay, m, v, then the denominator and the addcdiv.
void update_lanes(float* p, const float* g, float* m, float* v, const Vectors& k) {
  const __m256 grad = _mm256_loadu_ps(g);
  const __m256 param = _mm256_mul_ps(_mm256_loadu_ps(p), k.decay);
  const __m256 m1 =
      _mm256_fmadd_ps(grad, k.one_minus_beta1, _mm256_mul_ps(_mm256_loadu_ps(m), k.beta1));
  const __m256 v1 = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v), k.beta2),
                                  _mm256_mul_ps(_mm256_mul_ps(k.one_minus_beta2, grad), grad));
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v1), k.sqrt_bias2), k.eps);
  _mm256_storeu_ps(
      p, _mm256_add_ps(param, _mm256_mul_ps(k.minus_step_size, _mm256_div_ps(m1, denom))));
  _mm256_storeu_ps(m, m1);
  _mm256_storeu_ps(v, v1);
}

}  // namespace

void update(float* p, const float* g, float* m, float* v, int64_t n, const StepConstants& c) {
  const Vectors k = vectors_of(c);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) update_lanes(p + i, g + i, m + i, v + i, k);
  if (i == n) return;
  // The tail through a full vector of copies, so that it rounds exactly like the lanes above.
  alignas(32) float tail[4][kLanes] = {};
  const int64_t rest = n - i;
  for (int64_t j = 0; j < rest; ++j)
    tail[0][j] = p[i + j], tail[1][j] = g[i + j], tail[2][j] = m[i + j], tail[3][j] = v[i + j];
  update_lanes(tail[0], tail[1], tail[2], tail[3], k);
  for (int64_t j = 0; j < rest; ++j)
    p[i + j] = tail[0][j], m[i + j] = tail[2][j], v[i + j] = tail[3][j];
}

}  // namespace titan::adamw_kernels

#else  // not built for AVX2 (not x86-64): cpu_has_avx2_fma() is false, so this is never called

#include <cstdlib>

namespace titan::adamw_kernels {

void update(float*, const float*, float*, float*, int64_t, const StepConstants&) { std::abort(); }

}  // namespace titan::adamw_kernels
#endif
