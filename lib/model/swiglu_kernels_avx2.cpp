// Compiled with -mavx2 -mfma on x86-64 (lib/CMakeLists.txt); see attention_kernels_avx2.cpp for
// why everything but the header's entry points has internal linkage.
#include "model/swiglu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "model/avx2_math.h"

namespace titan::swiglu_kernels {
namespace {

constexpr int64_t kLanes = 8;  // floats in a __m256

// 1 + e^-a
__m256 one_plus_exp_minus(__m256 a) {
  return _mm256_add_ps(_mm256_set1_ps(1.0f), avx2::exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), a)));
}

// Lanes [0, n) of the arrays at i as a vector, the rest zero (n < kLanes): the tail of an array.
__m256 load_tail(const float* p, int64_t n) {
  alignas(32) float lanes[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i] = p[i];
  return _mm256_load_ps(lanes);
}

void store_tail(float* p, __m256 x, int64_t n) {
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, x);
  for (int64_t i = 0; i < n; ++i) p[i] = lanes[i];
}

// silu(a) as a / (1 + e^-a), one rounding fewer than a * sigmoid(a).
__m256 forward_lanes(__m256 a, __m256 b) {
  return _mm256_mul_ps(_mm256_div_ps(a, one_plus_exp_minus(a)), b);
}

// da and db of one vector of lanes.
void backward_lanes(__m256 a, __m256 b, __m256 g, __m256* da, __m256* db) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sig = _mm256_div_ps(one, one_plus_exp_minus(a));
  *db = _mm256_mul_ps(g, _mm256_mul_ps(a, sig));
  const __m256 slope = _mm256_mul_ps(sig, _mm256_fmadd_ps(a, _mm256_sub_ps(one, sig), one));
  *da = _mm256_mul_ps(_mm256_mul_ps(g, b), slope);
}

}  // namespace

void forward(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(out + i, forward_lanes(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n)
    store_tail(out + i, forward_lanes(load_tail(a + i, n - i), load_tail(b + i, n - i)), n - i);
}

void backward(const float* a, const float* b, const float* g, int64_t n, float* da, float* db) {
  int64_t i = 0;
  __m256 da_v, db_v;
  for (; i + kLanes <= n; i += kLanes) {
    backward_lanes(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_loadu_ps(g + i), &da_v,
                   &db_v);
    _mm256_storeu_ps(da + i, da_v);
    _mm256_storeu_ps(db + i, db_v);
  }
  if (i < n) {
    const int64_t tail = n - i;
    backward_lanes(load_tail(a + i, tail), load_tail(b + i, tail), load_tail(g + i, tail), &da_v,
                   &db_v);
    store_tail(da + i, da_v, tail);
    store_tail(db + i, db_v, tail);
  }
}

}  // namespace titan::swiglu_kernels

#else  // not built for AVX2 (not x86-64): cpu_has_avx2_fma() is false, so these are never called

#include <cstdlib>

namespace titan::swiglu_kernels {

void forward(const float*, const float*, int64_t, float*) { std::abort(); }
void backward(const float*, const float*, const float*, int64_t, float*, float*) { std::abort(); }

}  // namespace titan::swiglu_kernels
#endif
