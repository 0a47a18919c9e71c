#include "moe/experts.h"

#include "model/linear.h"
#include "model/model.h"
#include "model/swiglu.h"

namespace titan::moe {

GroupedExpertsImpl::GroupedExpertsImpl(int64_t dim, int64_t hidden_dim, int64_t num_experts,
                                       bool bf16)
    : bf16_(bf16) {
  // torch.empty in torchtitan: made without drawing from the generator.
  w1 = register_parameter("w1", at::empty({num_experts, hidden_dim, dim}));
  w2 = register_parameter("w2", at::empty({num_experts, dim, hidden_dim}));
  w3 = register_parameter("w3", at::empty({num_experts, hidden_dim, dim}));
}

at::Tensor GroupedExpertsImpl::forward(const at::Tensor& x,
                                       const std::vector<int64_t>& rows_per_expert) {
  // unbind and split each make one autograd node whose backward assembles every expert's
  // gradient at once (indexing w1[e] per expert would add E full-size gradients).
  // torchtitan's _run_experts_grouped_mm casts the input and every weight to bf16 and the
  // output back: the same casts, one expert at a time.
  const auto in = [&](const at::Tensor& t) { return bf16_ ? t.to(at::kBFloat16) : t; };
  const auto gate = in(w1).unbind(0), down = in(w2).unbind(0), up = in(w3).unbind(0);
  const auto rows = in(x).split_with_sizes(rows_per_expert);
  std::vector<at::Tensor> outputs;
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows_per_expert[e] == 0) continue;
    const at::Tensor& xe = rows[e];                                               // (m, D)
    auto h = swiglu(linear_by_weight(gate[e], xe), linear_by_weight(up[e], xe));  // (m, H)
    outputs.push_back(linear_by_weight(down[e], h));                              // (m, D)
  }
  return at::cat(outputs, 0).to(x.scalar_type());
}

void GroupedExpertsImpl::init_weights(double init_std, const ParamInit& init) {
  init(w1, [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); });
  for (auto* w : {&w2, &w3})
    init(*w, [&](at::Tensor& t) { trunc_normal_(t, 0.0, init_std, -2.0, 2.0); });
}

}  // namespace titan::moe
