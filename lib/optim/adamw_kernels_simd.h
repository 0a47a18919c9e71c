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
};

}  // namespace
}  // namespace titan::adamw_kernels
