// Causal attention of one head, hand-vectorized for x86-64 CPUs with AVX2 and FMA, and with
// AVX-512 where the CPU has it (same bits: util/simd_vectors.h).
//
// Why: in the debug model a head is 16 wide, so every matmul of attention has an inner dimension
// of 16, where a BLAS call spends more time on packing and dispatch than on arithmetic (about a
// quarter of the CPU's matmul rate), and softmax reads and writes the scores twice more. These
// kernels keep a group of query rows (4 or 8) in the registers and the L1 cache from the scores
// through the softmax to the product with v, and write the probabilities once, for the backward,
// with stores that bypass the cache.
//
// Numerics: every score and every output element is one chain of fused multiply-adds in a fixed
// order (over the head dim, or over the keys), and exp is a fixed polynomial, so the results depend
// only on the inputs: not on the thread count, nor on how rows are grouped, nor on the vector
// width. They differ in the last bits from ATen's kernels (tests bound the difference).
//
// The kernels are built in attention_kernels_avx2.cpp and attention_kernels_avx512.cpp, from
// attention_kernels_simd.h; forward_head and backward_head call the one for `isa`, which the CPU
// must have (util/cpu_features.h). No kernel function is inline in a shared header, so no AVX
// code can be picked by the linker for a caller built for the baseline ISA.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace titan::attention_kernels {

// The forward saves, per head, each query row's unnormalized weights exp(score - row max), and the
// inverse of their sum (the probabilities are weight * inverse). The weights are packed by row:
// row i holds keys 0..i, padded with zeros to a multiple of 16 floats; rows follow each other.
// Offset of row `row`; packed_row_offset(T) is the size of a head's block.
int64_t packed_row_offset(int64_t row);

// A (T, D) matrix of one head: row t's D floats start at data + t * row_stride.
struct Rows {
  const float* data;
  int64_t row_stride;
};
struct MutableRows {
  float* data;
  int64_t row_stride;
};

// The most query rows (or key columns) the kernels keep in registers together (scratch sizes).
constexpr int kMaxRowGroup = 8;
// Query rows whose share of the key gradients the backward adds up at once (a multiple of 16).
constexpr int kPanelRows = 16;

// Length of a score row, and width of a transposed (D, width) head: keys go 16 at a time.
int64_t key_width(int64_t T);

// Floats of scratch that forward_head / backward_head need; reusable across heads on one thread.
int64_t forward_scratch_floats(int64_t T, int64_t D);
int64_t backward_scratch_floats(int64_t T, int64_t D);

// Requires the CPU to have `isa` (cpu_has_avx2_fma(), and cpu_has_avx512() for kAvx512), T >= 1,
// D >= 8 and a multiple of 8, scratch of
// forward_scratch_floats(T, D) floats, weights of packed_row_offset(T) floats, inverse_sums of T.
// Writes out = softmax(q k^T * scale, causal) v, and the weights and inverse sums described above.
void forward_head(VectorIsa isa, Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D,
                  MutableRows out, float* weights, float* inverse_sums, float* scratch);

// Requires what forward_head does, its out, weights and inverse_sums, and grad_out (T, D).
// Writes the gradients of forward_head's out with respect to q, k and v (every row of each).
void backward_head(VectorIsa isa, Rows q, Rows k, Rows v, Rows out, Rows grad_out,
                   const float* weights, const float* inverse_sums, float scale, int64_t T,
                   int64_t D, MutableRows dq, MutableRows dk, MutableRows dv, float* scratch);

// The two builds that forward_head and backward_head dispatch to (the same, less `isa`).
namespace avx2 {
void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* weights, float* inverse_sums, float* scratch);
void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* weights,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch);
}  // namespace avx2
namespace avx512 {
void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* weights, float* inverse_sums, float* scratch);
void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* weights,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch);
}  // namespace avx512

}  // namespace titan::attention_kernels
