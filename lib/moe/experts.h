// The routed experts as torchtitan v0.2.2's GroupedExperts holds them (torchtitan/models/moe):
// w1 and w3 (E, H, D) and w2 (E, D, H) stacked per expert, each expert a SwiGLU
// w2[e](silu(w1[e] x) * w3[e] x). libtorch has no grouped matmul: the experts run one after
// another, each on its rows, on titan's linear and SwiGLU kernels (torchtitan's for-loop path).
//
// Shapes: M routed rows, D dim, H moe_inter_dim, E experts.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "model/layers.h"

namespace titan::moe {

class GroupedExpertsImpl : public torch::nn::Module {
 public:
  // bf16: the experts compute in bfloat16 (MoEArgs::bf16_experts).
  GroupedExpertsImpl(int64_t dim, int64_t hidden_dim, int64_t num_experts, bool bf16 = false);
  // x (M, D): the rows of expert 0, then expert 1, ...; rows_per_expert (E) sums to M.
  // Returns (M, D) in x's dtype, each row through its expert. Differentiable in x and the
  // weights; an expert without rows runs nothing.
  at::Tensor forward(const at::Tensor& x, const std::vector<int64_t>& rows_per_expert);
  // torchtitan's init: w1 truncated normal std 0.02, w2 and w3 std init_std.
  void init_weights(double init_std, const ParamInit& init);
  at::Tensor w1, w2, w3;

 private:
  bool bf16_;
};
TORCH_MODULE(GroupedExperts);

}  // namespace titan::moe
