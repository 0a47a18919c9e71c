// Token-choice top-k routing as torchtitan v0.2.2's TokenChoiceTopKRouter computes it
// (torchtitan/models/moe/moe.py), with one difference it leaves open: the choice among equal
// scores. torch.topk(sorted=False) breaks ties as its kernel happens to; here a total order does
// (the higher score first, then the lower expert index), the same on every device and thread
// count, and the chosen experts of a token are listed in that order.
//
// Shapes: N tokens, D dim, E experts, K top_k.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/layers.h"
#include "model/model_args.h"

namespace titan::moe {

struct Routing {
  // (N, E) float32: softmax or sigmoid of the gate's logits (before expert_bias).
  at::Tensor scores;
  // (N, K) int64: each token's experts, best first by the selection score (scores + expert_bias,
  // node-limited), ties to the lower index.
  at::Tensor selected;
  // (N, K) float32: the scores of `selected` (not biased), after route_norm and route_scale:
  // the weights of the experts' outputs.
  at::Tensor top_scores;
};

// The K largest of each row of `values` (N, E), larger first, equal values by the lower column:
// their columns (N, K) int64.
at::Tensor top_k_indices(const at::Tensor& values, int64_t k);

class RouterImpl : public torch::nn::Module {
 public:
  RouterImpl(int64_t dim, const MoEArgs& args);
  // x (N, D); expert_bias (E) float32 or undefined.
  Routing forward(const at::Tensor& x, const at::Tensor& expert_bias);
  // torchtitan's init: the gate's weight truncated normal (std init_std); its bias is left as
  // nn.Linear made it.
  void init_weights(double init_std, const ParamInit& init);
  torch::nn::Linear gate{nullptr};  // (E, D)

 private:
  // Scores of the experts outside the num_limited_groups best groups set to -inf.
  at::Tensor limit_to_groups(const at::Tensor& scores_for_choice) const;
  MoEArgs args_;
};
TORCH_MODULE(Router);

}  // namespace titan::moe
