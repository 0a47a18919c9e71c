// SwiGLU's elementwise part, silu(a) * b, hand-vectorized for x86-64 CPUs with AVX2 and FMA, and
// with AVX-512 (same bits) where the CPU has it.
//
// Why: in the debug model's feed-forward, ATen's silu, its backward and the two products around
// them are five passes over (tokens, hidden) tensors, and libtorch 1.13's silu spends about a
// nanosecond per element on SLEEF's exp and a division. These kernels make one pass each way.
//
// Numerics: sigmoid(a) = 1 / (1 + e^-a) with simd_vectors.h's exp, then silu = a * sigmoid; the
// backward uses silu'(a) = sigmoid * (1 + a * (1 - sigmoid)), ATen's formula. Each element depends
// only on its own inputs, so the results do not depend on the thread count or the chunking; they
// differ from ATen's in the last bits (tests bound the difference).
//
// Built twice from swiglu_kernels_simd.h: avx2:: in a file compiled for AVX2 and FMA, avx512:: in
// one compiled for AVX-512 too. Call each only when the CPU has what it was built for
// (util/cpu_features.h).
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace titan::swiglu_kernels {

namespace avx2 {

// Requires n >= 0. out[i] = silu(a[i]) * b[i] for i < n. out may not
// alias a or b.
void forward(const float* a, const float* b, int64_t n, float* out);

// Requires n >= 0. With g the gradient of forward's out:
// da[i] = g[i] * b[i] * silu'(a[i]), db[i] = g[i] * silu(a[i]). da and db alias nothing.
void backward(const float* a, const float* b, const float* g, int64_t n, float* da, float* db);

}  // namespace avx2

// The same, for AVX-512.
namespace avx512 {
void forward(const float* a, const float* b, int64_t n, float* out);
void backward(const float* a, const float* b, const float* g, int64_t n, float* da, float* db);
}  // namespace avx512

}  // namespace titan::swiglu_kernels
