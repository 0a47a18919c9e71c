// RMSNorm of float rows, hand-vectorized for x86-64 CPUs with AVX2 and FMA, and with AVX-512
// (same bits) where the CPU has it.
//
// Why: ATen's RMSNorm is five elementwise passes forward (pow, mean, add, rsqrt, two products)
// and about twice as many backward, each over a (tokens, dim) tensor, at every norm of every
// layer. These kernels make one pass over a row each way (two for the input gradient).
//
// Numerics: a row's sum of squares is 8 FMA chains over its columns in order, then added up in a
// fixed order; the weight gradient adds rows up in fixed chunks of kWeightChunkRows, the chunks
// pairwise (rmsnorm.cpp). Nothing depends on the thread count; the results differ from ATen's in
// the last bits.
//
// Built twice from rmsnorm_kernels_simd.h: avx2:: in a file compiled for AVX2 and FMA, avx512:: in
// one compiled for AVX-512 too. Call each only when the CPU has what it was built for
// (util/cpu_features.h).
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace titan::rmsnorm_kernels {

// Rows the weight gradient adds up per partial sum (see backward_weight_chunk).
constexpr int64_t kWeightChunkRows = 16;

namespace avx2 {

// Requires C a positive multiple of 8. For rows [0, rows) of x (rows, C):
// rstd[n] = 1 / sqrt(mean(x[n]^2) + eps) and y[n] = (x[n] * rstd[n]) * w.
void forward(const float* x, const float* w, float eps, int64_t rows, int64_t C, float* y,
             float* rstd);

// Requires what forward does, its rstd, and gy (rows, C), the gradient of y. Writes dx (rows, C):
// rstd * (gy w - x_hat * mean(gy w x_hat)), with x_hat = x * rstd.
void backward_input(const float* x, const float* w, const float* rstd, const float* gy,
                    int64_t rows, int64_t C, float* dx);

// Requires what backward_input does, rows <= kWeightChunkRows. dw_part[c] = sum over the rows, in
// order, of gy[n][c] * x_hat[n][c].
void backward_weight_chunk(const float* x, const float* rstd, const float* gy, int64_t rows,
                           int64_t C, float* dw_part);

}  // namespace avx2

// The same, for AVX-512.
namespace avx512 {
void forward(const float* x, const float* w, float eps, int64_t rows, int64_t C, float* y,
             float* rstd);
void backward_input(const float* x, const float* w, const float* rstd, const float* gy,
                    int64_t rows, int64_t C, float* dx);
void backward_weight_chunk(const float* x, const float* rstd, const float* gy, int64_t rows,
                           int64_t C, float* dw_part);
}  // namespace avx512

}  // namespace titan::rmsnorm_kernels
