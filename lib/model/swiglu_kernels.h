// SwiGLU's elementwise part, silu(a) * b, hand-vectorized for x86-64 CPUs with AVX2 and FMA.
//
// Why: in the debug model's feed-forward, ATen's silu, its backward and the two products around
// them are five passes over (tokens, hidden) tensors, and libtorch 1.13's silu spends about a
// nanosecond per element on SLEEF's exp and a division. These kernels make one pass each way.
//
// Numerics: sigmoid(a) = 1 / (1 + e^-a) with avx2_math.h's exp, then silu = a * sigmoid; the
// backward uses silu'(a) = sigmoid * (1 + a * (1 - sigmoid)), ATen's formula. Each element depends
// only on its own inputs, so the results do not depend on the thread count or the chunking; they
// differ from ATen's in the last bits (tests bound the difference).
//
// The kernels' translation unit is compiled for AVX2: call nothing here before cpu_has_avx2_fma().
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace titan::swiglu_kernels {

// Requires cpu_has_avx2_fma() and n >= 0. out[i] = silu(a[i]) * b[i] for i < n. out may not
// alias a or b.
void forward(const float* a, const float* b, int64_t n, float* out);

// Requires cpu_has_avx2_fma() and n >= 0. With g the gradient of forward's out:
// da[i] = g[i] * b[i] * silu'(a[i]), db[i] = g[i] * silu(a[i]). da and db alias nothing.
void backward(const float* a, const float* b, const float* g, int64_t n, float* da, float* db);

}  // namespace titan::swiglu_kernels
