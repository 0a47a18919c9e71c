// The body of adamw_kernels.h's kernel, a template over the vector width (util/simd_vectors.h),
// included only by adamw_kernels_avx2.cpp and adamw_kernels_avx512.cpp (unnamed namespace: each
// gets its own copy). Elementwise, so both widths give the same bits.
#pragma once

#include "optim/adamw_kernels.h"
#include "util/simd_vectors.h"

namespace titan::adamw_kernels {
namespace {

template <typename V>
struct Kernels {
  using F = typename V::F;

  struct Vectors {
    F decay, beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bias2, eps, minus_step_size;
  };

  static Vectors vectors_of(const StepConstants& c) {
    return {V::set1(c.decay), V::set1(c.beta1),           V::set1(c.one_minus_beta1),
            V::set1(c.beta2), V::set1(c.one_minus_beta2), V::set1(c.sqrt_bias2),
            V::set1(c.eps),   V::set1(c.minus_step_size)};
  }

  // One vector of lanes; libtorch's order: decay, m, v, then the denominator and the addcdiv.
  static void update_lanes(F grad, F* param, F* m, F* v, const Vectors& k) {
    const F decayed = V::mul(*param, k.decay);
    *m = V::fmadd(grad, k.one_minus_beta1, V::mul(*m, k.beta1));
    *v = V::add(V::mul(*v, k.beta2), V::mul(V::mul(k.one_minus_beta2, grad), grad));
    const F denom = V::add(V::div(V::sqrt(*v), k.sqrt_bias2), k.eps);
    *param = V::add(decayed, V::mul(k.minus_step_size, V::div(*m, denom)));
  }

  static void update(float* p, const float* g, float* m, float* v, int64_t n,
                     const StepConstants& c) {
    const Vectors k = vectors_of(c);
    for (int64_t i = 0; i < n; i += V::kLanes) {
      const int64_t lanes = n - i < V::kLanes ? n - i : V::kLanes;
      if (lanes == V::kLanes) {
        F param = V::load(p + i), m1 = V::load(m + i), v1 = V::load(v + i);
        update_lanes(V::load(g + i), &param, &m1, &v1, k);
        V::store(p + i, param), V::store(m + i, m1), V::store(v + i, v1);
      } else {  // the tail through a whole vector, so that it rounds like the lanes above
        F param = V::load_first(p + i, lanes), m1 = V::load_first(m + i, lanes),
          v1 = V::load_first(v + i, lanes);
        update_lanes(V::load_first(g + i, lanes), &param, &m1, &v1, k);
        V::store_first(p + i, param, lanes), V::store_first(m + i, m1, lanes),
            V::store_first(v + i, v1, lanes);
      }
    }
  }

  // One vector at p (its first `lanes`, 1 to kLanes, the rest left alone) updated; its
  // weights after and their change squared into `weights` and `change` (V::kDoubleVectors each).
  static void update_measured_vector(float* p, const float* g, float* m, float* v, int64_t lanes,
                                     const Vectors& k, typename V::D* weights,
                                     typename V::D* change) {
    const bool whole = lanes == V::kLanes;
    F param = whole ? V::load(p) : V::load_first(p, lanes);
    F m1 = whole ? V::load(m) : V::load_first(m, lanes);
    F v1 = whole ? V::load(v) : V::load_first(v, lanes);
    const F grad = whole ? V::load(g) : V::load_first(g, lanes);
    const F before = param;
    update_lanes(grad, &param, &m1, &v1, k);
    if (whole) {
      V::store(p, param), V::store(m, m1), V::store(v, v1);
    } else {
      V::store_first(p, param, lanes), V::store_first(m, m1, lanes), V::store_first(v, v1, lanes);
    }
    // Lanes past the end are zeroed: their update of zeros is NaN when eps is 0.
    V::add_squares(V::first_or(param, lanes, V::zero()), weights);
    V::add_squares(V::first_or(V::sub(before, param), lanes, V::zero()), change);
  }

  static Squares update_measured(float* p, const float* g, float* m, float* v, int64_t n,
                                 const StepConstants& c) {
    constexpr int kVectorsPerRow = 16 / V::kLanes;  // 16 floats: 16 double accumulators
    constexpr int kAccumulators = kVectorsPerRow * V::kDoubleVectors;
    const Vectors k = vectors_of(c);
    typename V::D weights[kAccumulators], change[kAccumulators];
    for (int a = 0; a < kAccumulators; ++a) weights[a] = change[a] = V::zero_double();
    for (int64_t i = 0; i < n; i += 16) {
      for (int r = 0; r < kVectorsPerRow; ++r) {
        const int64_t at = i + r * V::kLanes;
        const int64_t left = n - at;
        if (left <= 0) break;  // adds nothing: the sums are the same as AVX-512's
        const int64_t lanes = left < V::kLanes ? left : V::kLanes;
        update_measured_vector(p + at, g + at, m + at, v + at, lanes, k,
                               weights + r * V::kDoubleVectors, change + r * V::kDoubleVectors);
      }
    }
    double w[16], d[16];
    constexpr int kPerVector = 16 / kAccumulators;
    for (int a = 0; a < kAccumulators; ++a) {
      V::store_double(w + a * kPerVector, weights[a]);
      V::store_double(d + a * kPerVector, change[a]);
    }
    Squares out;
    for (int j = 0; j < 16; ++j) out.weights += w[j], out.change += d[j];
    return out;
  }
};

}  // namespace
}  // namespace titan::adamw_kernels
