// Vector math shared by the AVX2 kernel files (attention_kernels_avx2.cpp,
// swiglu_kernels_avx2.cpp). Include it only from files compiled with -mavx2 -mfma. Everything here
// has internal linkage (static), so each of those files gets its own copy and none can be picked by
// the linker for code built for the baseline ISA.
#pragma once

#include <immintrin.h>

namespace titan::avx2 {

// e^x to about 2 ulp (Cephes' expf polynomial). x is clamped to [-87.3, 88] so that 2^n stays a
// normal float: below -87.3 the result is about 1e-38 instead of smaller, which neither a softmax
// nor a sigmoid can tell; above 88 it is e^88 (about 1.7e38) instead of infinity.
static inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // x - n ln2, in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i two_n = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);  // 2^n as float bits
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
}

}  // namespace titan::avx2
