// The body of swiglu_kernels.h's kernels, a template over the vector width (util/simd_vectors.h),
// included only by swiglu_kernels_avx2.cpp and swiglu_kernels_avx512.cpp (unnamed namespace: each
// gets its own copy). Elementwise, so both widths give the same bits.
#pragma once

#include "model/swiglu_kernels.h"
#include "util/simd_vectors.h"

namespace titan::swiglu_kernels {
namespace {

template <typename V>
struct Kernels {
  using F = typename V::F;

  // 1 + e^-a
  static F one_plus_exp_minus(F a) { return V::add(V::set1(1.0f), V::exp(V::sub(V::zero(), a))); }

  // silu(a) as a / (1 + e^-a), one rounding fewer than a * sigmoid(a).
  static F forward_lanes(F a, F b) { return V::mul(V::div(a, one_plus_exp_minus(a)), b); }

  // da and db of one vector of lanes.
  static void backward_lanes(F a, F b, F g, F* da, F* db) {
    const F one = V::set1(1.0f);
    const F sig = V::div(one, one_plus_exp_minus(a));
    *db = V::mul(g, V::mul(a, sig));
    const F slope = V::mul(sig, V::fmadd(a, V::sub(one, sig), one));
    *da = V::mul(V::mul(g, b), slope);
  }

  static void forward(const float* a, const float* b, int64_t n, float* out) {
    int64_t i = 0;
    for (; i + V::kLanes <= n; i += V::kLanes)
      V::store(out + i, forward_lanes(V::load(a + i), V::load(b + i)));
    if (i < n) {
      const int64_t tail = n - i;
      V::store_first(out + i, forward_lanes(V::load_first(a + i, tail), V::load_first(b + i, tail)),
                     tail);
    }
  }

  static void backward(const float* a, const float* b, const float* g, int64_t n, float* da,
                       float* db) {
    int64_t i = 0;
    F da_v, db_v;
    for (; i + V::kLanes <= n; i += V::kLanes) {
      backward_lanes(V::load(a + i), V::load(b + i), V::load(g + i), &da_v, &db_v);
      V::store(da + i, da_v);
      V::store(db + i, db_v);
    }
    if (i < n) {
      const int64_t tail = n - i;
      backward_lanes(V::load_first(a + i, tail), V::load_first(b + i, tail),
                     V::load_first(g + i, tail), &da_v, &db_v);
      V::store_first(da + i, da_v, tail);
      V::store_first(db + i, db_v, tail);
    }
  }
};

}  // namespace
}  // namespace titan::swiglu_kernels
