// Causal attention of one head, hand-vectorized for x86-64 CPUs with AVX2 and FMA, and with
// AVX-512 where the CPU has it (same bits: util/simd_vectors.h).
//
// Why: in the debug model a head is 16 wide, so every matmul of attention has an inner dimension
// of 16, where a BLAS call spends more time on packing and dispatch than on arithmetic (about a
// quarter of the CPU's matmul rate), and softmax reads and writes the scores twice more. These
// kernels keep a group of query rows (4 or 8) in the registers and the L1 cache from the scores
// through the softmax to the product with v. The forward saves only each row's maximum score and
// the inverse of its weights' sum; the backward computes the scores and weights again from q and k,
// with the same operations (so the same bits). Writing the weights out for the backward (34 MB a
// layer of the debug model at batch 4) kept the forward waiting on memory, and holding them took
// more memory than the rest of the layer.
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
// forward_scratch_floats(T, D) floats, row_max and inverse_sums of T floats.
// Writes out = softmax(q k^T * scale, causal) v; row_max[i], the largest of row i's scaled scores
// (keys 0..i); and inverse_sums[i], 1 / the sum of its weights exp(score - row_max[i]).
void forward_head(VectorIsa isa, Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D,
                  MutableRows out, float* row_max, float* inverse_sums, float* scratch);

// Requires what forward_head does, its out, row_max and inverse_sums, and grad_out (T, D).
// Writes the gradients of forward_head's out with respect to q, k and v (every row of each).
void backward_head(VectorIsa isa, Rows q, Rows k, Rows v, Rows out, Rows grad_out,
                   const float* row_max, const float* inverse_sums, float scale, int64_t T,
                   int64_t D, MutableRows dq, MutableRows dk, MutableRows dv, float* scratch);

// The two builds that forward_head and backward_head dispatch to (the same, less `isa`).
namespace avx2 {
void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* row_max, float* inverse_sums, float* scratch);
void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* row_max,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch);
}  // namespace avx2
namespace avx512 {
void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* row_max, float* inverse_sums, float* scratch);
void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* row_max,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch);
}  // namespace avx512

}  // namespace titan::attention_kernels
