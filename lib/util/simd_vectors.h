// The vector operations titan's fused CPU kernels are written in, for each instruction set they
// are built for: Avx2 (8 floats, __m256) in files compiled with -mavx2 -mfma, Avx512 (16 floats,
// __m512) in files compiled with -mavx512f as well. A kernel is a template over one of these, and
// each *_avx2.cpp / *_avx512.cpp file instantiates it for its own.
//
// Contract: the two give the same bits. Every elementwise operation here is one IEEE operation per
// lane (exp is the same polynomial in the same order), so an element computed by a chain of them
// is the same whatever the width. What is not elementwise (a reduction across lanes) is done here
// in one fixed order on 256-bit vectors in both (sum8, dot8, sum16), or into float64 accumulators
// laid out by element index mod 16 (add_squares, 16 / kLanes vectors at a time): a kernel that
// reduces across lanes calls those, never a width-dependent sum. Tests check AVX-512 against AVX2
// bit for bit.
//
// Include this only from files built for AVX2 or more. Everything is in an unnamed namespace, so
// each file has its own copy and the linker cannot hand an AVX-512 copy to code built for AVX2.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cstdint>

namespace titan::simd {
namespace {

// The sum of x's 8 lanes in a fixed order: halves, then pairs, then the last two.
inline float sum8(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// a . b over n floats (n a multiple of 8): lane l sums the products at l, l + 8, ... in order.
inline float dot8(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return sum8(acc);
}

// e^x to about 2 ulp (Cephes' expf polynomial), written once for both widths. x is clamped to
// [-87.3, 88] so that 2^n stays a normal float: below -87.3 the result is about 1e-38 instead of
// smaller, which neither a softmax nor a sigmoid can tell; above 88 it is e^88 (about 1.7e38).
template <typename V>
inline typename V::F exp_lanes(typename V::F x) {
  using F = typename V::F;
  x = V::min(x, V::set1(88.0f));
  x = V::max(x, V::set1(-87.3f));
  const F n = V::round_nearest(V::mul(x, V::set1(1.44269504088896341f)));
  F r = V::fnmadd(n, V::set1(0.693359375f), x);  // x - n ln2, in two parts
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  F p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::mul(p, V::pow2_of_integral(n));
}

struct Avx2 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c, one rounding
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b, one rounding
  static F round_nearest(F x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F pow2_of_integral(F n) {  // 2^n for integral n in the normal range, from its bits
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static F exp(F x) { return exp_lanes<Avx2>(x); }
  // Lanes [0, n) of x, the others `fill` (n may be <= 0 or >= kLanes).
  static F first_or(F x, int64_t n, F fill) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int32_t valid = static_cast<int32_t>(n < kLanes ? (n < 0 ? 0 : n) : kLanes);
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid), iota));
    return _mm256_blendv_ps(fill, x, keep);
  }
  // The first n floats at p (0 <= n < kLanes), the other lanes zero: an array's tail.
  static F load_first(const float* p, int64_t n) {
    alignas(32) float lanes[kLanes] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i] = p[i];
    return _mm256_load_ps(lanes);
  }
  static void store_first(float* p, F x, int64_t n) {
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, x);
    for (int64_t i = 0; i < n; ++i) p[i] = lanes[i];
  }
  static float max_lane(F x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The sum of 16 floats held in 16 / kLanes vectors (the first 8 in v[0]): the two halves
  // lane by lane, then sum8.
  static float sum16(const F* v) { return sum8(_mm256_add_ps(v[0], v[1])); }
  // Squares summed in float64: lane l of x, squared (exact: a float's square fits a double), is
  // added to the double at l of the kDoubleVectors vectors `acc` (4 doubles each).
  using D = __m256d;
  static constexpr int kDoubleVectors = 2;
  static D zero_double() { return _mm256_setzero_pd(); }
  static void add_squares(F x, D* acc) {
    const D low = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    const D high = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    acc[0] = _mm256_add_pd(acc[0], _mm256_mul_pd(low, low));
    acc[1] = _mm256_add_pd(acc[1], _mm256_mul_pd(high, high));
  }
  static void store_double(double* p, D x) { _mm256_storeu_pd(p, x); }
};

#if defined(__AVX512F__)
struct Avx512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F round_nearest(F x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F pow2_of_integral(F n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static F exp(F x) { return exp_lanes<Avx512>(x); }
  static __mmask16 first_lanes(int64_t n) {
    return n <= 0 ? 0 : n >= kLanes ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
  }
  static F first_or(F x, int64_t n, F fill) {
    return _mm512_mask_blend_ps(first_lanes(n), fill, x);
  }
  // Masked: lanes past n are neither read nor written, so no fault past the array's end.
  static F load_first(const float* p, int64_t n) {
    return _mm512_maskz_loadu_ps(first_lanes(n), p);
  }
  static void store_first(float* p, F x, int64_t n) { _mm512_mask_storeu_ps(p, first_lanes(n), x); }
  static float max_lane(F x) { return _mm512_reduce_max_ps(x); }  // max is exact in any order
  static __m256 low_half(F x) { return _mm512_castps512_ps256(x); }
  static __m256 high_half(F x) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  }
  static float sum16(const F* v) { return sum8(_mm256_add_ps(low_half(v[0]), high_half(v[0]))); }
  using D = __m512d;  // as in Avx2, 8 doubles a vector
  static constexpr int kDoubleVectors = 2;
  static D zero_double() { return _mm512_setzero_pd(); }
  static void add_squares(F x, D* acc) {
    const D low = _mm512_cvtps_pd(low_half(x)), high = _mm512_cvtps_pd(high_half(x));
    acc[0] = _mm512_add_pd(acc[0], _mm512_mul_pd(low, low));
    acc[1] = _mm512_add_pd(acc[1], _mm512_mul_pd(high, high));
  }
  static void store_double(double* p, D x) { _mm512_storeu_pd(p, x); }
};
#endif

}  // namespace
}  // namespace titan::simd
#endif
