// AdamW's update of one parameter, hand-vectorized for x86-64 CPUs with AVX2 and FMA, and with
// AVX-512 (same bits) where the CPU has it.
//
// Why: libtorch's AdamW::step makes nine passes over each parameter and its state (decay, two for
// each moment, sqrt, divide, add eps, addcdiv) and allocates two temporaries: on the debug model's
// 6.2M parameters that is about 550 MB of memory traffic a step, where one pass needs 170 MB.
//
// Numerics: the same formula in the same order as libtorch 1.13's AdamW, in float, with the
// moments' updates as fused multiply-adds; each element depends only on its own inputs, so the
// result does not depend on the thread count. It may differ from libtorch's in the last bit.
//
// Built twice from adamw_kernels_simd.h: avx2:: in a file compiled for AVX2 and FMA, avx512:: in
// one compiled for AVX-512 too. Call each only when the CPU has what it was built for
// (util/cpu_features.h).
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace titan::adamw_kernels {

// One step's constants, as libtorch computes them (in double, then used as float).
struct StepConstants {
  float decay;         // 1 - lr * weight_decay
  float beta1, beta2;  // the moments' decay
  float one_minus_beta1, one_minus_beta2;
  float sqrt_bias2;       // sqrt(1 - beta2^step)
  float eps;              // added to the denominator
  float minus_step_size;  // -lr / (1 - beta1^step)
};

// Sums of squares, in float64, of the weights after an update and of its change to them.
struct Squares {
  double weights = 0;
  double change = 0;  // of (p before - p after), each difference rounded to float
};

namespace avx2 {
// Requires n >= 0, and p, m, v of n floats aliasing nothing else. With g the gradient:
// p *= decay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
// p += minus_step_size * m / (sqrt(v) / sqrt_bias2 + eps).
void update(float* p, const float* g, float* m, float* v, int64_t n, const StepConstants& c);
// update, the same bits, also returning the Squares of these n elements: element i's square goes
// to accumulator i mod 16, each summed in element order, then the 16 summed in order. So the sums
// are the same at both widths; they depend on where the n elements start, nothing else.
Squares update_measured(float* p, const float* g, float* m, float* v, int64_t n,
                        const StepConstants& c);
}  // namespace avx2

// The same, for AVX-512.
namespace avx512 {
void update(float* p, const float* g, float* m, float* v, int64_t n, const StepConstants& c);
Squares update_measured(float* p, const float* g, float* m, float* v, int64_t n,
                        const StepConstants& c);
}  // namespace avx512

}  // namespace titan::adamw_kernels
