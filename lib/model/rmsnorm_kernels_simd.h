// The body of rmsnorm_kernels.h's kernels, a template over the vector width (util/simd_vectors.h),
// included only by rmsnorm_kernels_avx2.cpp and rmsnorm_kernels_avx512.cpp (unnamed namespace:
// each gets its own copy). A row's sums run on 256-bit vectors in both (simd::dot8's order) and
// the rest is elementwise, so both widths give the same bits.
#pragma once

#include <cmath>

#include "model/rmsnorm_kernels.h"
#include "util/simd_vectors.h"

namespace titan::rmsnorm_kernels {
namespace {

// sum over c of gy[c] * w[c] * x[c] (x_hat without its row's rstd), 8 chains then simd::sum8.
inline float row_gradient_dot(const float* x, const float* w, const float* gy, int64_t C) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t c = 0; c < C; c += 8)
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(gy + c), _mm256_loadu_ps(w + c)),
                          _mm256_loadu_ps(x + c), acc);
  return simd::sum8(acc);
}

template <typename V>
struct Kernels {
  using F = typename V::F;

  // Calls fn(c, n) for the vectors of a row of C floats (C a multiple of 8): n == kLanes but for a
  // last half vector when C is not a multiple of kLanes.
  template <typename Fn>
  static void for_each_vector(int64_t C, const Fn& fn) {
    for (int64_t c = 0; c < C; c += V::kLanes) fn(c, C - c < V::kLanes ? C - c : V::kLanes);
  }
  static F load(const float* p, int64_t n) {
    return n == V::kLanes ? V::load(p) : V::load_first(p, n);
  }
  static void store(float* p, F x, int64_t n) {
    if (n == V::kLanes)
      V::store(p, x);
    else
      V::store_first(p, x, n);
  }

  static void forward(const float* x, const float* w, float eps, int64_t rows, int64_t C, float* y,
                      float* rstd) {
    for (int64_t n = 0; n < rows; ++n) {
      const float* xr = x + n * C;
      const float r = 1.0f / std::sqrt(simd::dot8(xr, xr, C) / static_cast<float>(C) + eps);
      rstd[n] = r;
      const F vr = V::set1(r);
      for_each_vector(C, [&](int64_t c, int64_t lanes) {
        store(y + n * C + c, V::mul(V::mul(load(xr + c, lanes), vr), load(w + c, lanes)), lanes);
      });
    }
  }

  static void backward_input(const float* x, const float* w, const float* rstd, const float* gy,
                             int64_t rows, int64_t C, float* dx) {
    for (int64_t n = 0; n < rows; ++n) {
      const float *xr = x + n * C, *gr = gy + n * C;
      const float r = rstd[n];
      // mean(gy w x_hat) = r * mean(gy w x); then dx = r * (gy w - x_hat * that).
      const float mean_dot = r * row_gradient_dot(xr, w, gr, C) / static_cast<float>(C);
      const F vr = V::set1(r), vmean = V::set1(mean_dot);
      for_each_vector(C, [&](int64_t c, int64_t lanes) {
        const F x_hat = V::mul(load(xr + c, lanes), vr);
        const F gw = V::mul(load(gr + c, lanes), load(w + c, lanes));
        store(dx + n * C + c, V::mul(vr, V::fnmadd(x_hat, vmean, gw)), lanes);
      });
    }
  }

  static void backward_weight_chunk(const float* x, const float* rstd, const float* gy,
                                    int64_t rows, int64_t C, float* dw_part) {
    for_each_vector(C, [&](int64_t c, int64_t lanes) {
      F acc = V::zero();
      for (int64_t n = 0; n < rows; ++n) {
        const F x_hat = V::mul(load(x + n * C + c, lanes), V::set1(rstd[n]));
        acc = V::fmadd(load(gy + n * C + c, lanes), x_hat, acc);
      }
      store(dw_part + c, acc, lanes);
    });
  }
};

}  // namespace
}  // namespace titan::rmsnorm_kernels
