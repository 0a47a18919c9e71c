// The parts of attention_kernels.h that run before the CPU check, so built for the baseline ISA:
// sizes, and the dispatch to the build for the run's vector width.
#include "model/attention_kernels.h"

namespace titan::attention_kernels {

int64_t key_width(int64_t T) { return (T + 15) / 16 * 16; }

int64_t forward_scratch_floats(int64_t T, int64_t D) {
  return (D + kMaxRowGroup) * key_width(T);  // k transposed, then one group's scores
}

int64_t backward_scratch_floats(int64_t T, int64_t D) {
  // k and v transposed, a panel's probabilities and scores' gradient, the dk and dv sums
  return 2 * D * key_width(T) + 2 * kPanelRows * key_width(T) + 2 * key_width(T) * D;
}

void forward_head(VectorIsa isa, Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D,
                  MutableRows out, float* row_max, float* inverse_sums, float* scratch) {
  if (isa == VectorIsa::kAvx512)
    return avx512::forward_head(q, k, v, scale, T, D, out, row_max, inverse_sums, scratch);
  avx2::forward_head(q, k, v, scale, T, D, out, row_max, inverse_sums, scratch);
}

void backward_head(VectorIsa isa, Rows q, Rows k, Rows v, Rows out, Rows grad_out,
                   const float* row_max, const float* inverse_sums, float scale, int64_t T,
                   int64_t D, MutableRows dq, MutableRows dk, MutableRows dv, float* scratch) {
  if (isa == VectorIsa::kAvx512)
    return avx512::backward_head(q, k, v, out, grad_out, row_max, inverse_sums, scale, T, D, dq, dk,
                                 dv, scratch);
  avx2::backward_head(q, k, v, out, grad_out, row_max, inverse_sums, scale, T, D, dq, dk, dv,
                      scratch);
}

}  // namespace titan::attention_kernels
