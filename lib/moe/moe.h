// The mixture-of-experts layer of torchtitan v0.2.2 (torchtitan/models/moe/moe.py, MoE): a
// router, routed experts, optional shared experts, and the state of auxiliary-loss-free load
// balancing (expert_bias, tokens_per_expert; updated by moe/load_balance.h). Parameter names
// match torchtitan's: experts.w1/w2/w3, router.gate.weight, shared_experts.w1.weight, ...
//
// Shapes: B batch, T sequence, N = B x T tokens, D dim, E experts, K top_k.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "model/layers.h"
#include "model/model.h"
#include "model/model_args.h"
#include "moe/experts.h"
#include "moe/router.h"

namespace titan::moe {

// Throws std::invalid_argument naming the field unless `args` describe a layer that can route:
// a score function torchtitan has, 1 <= top_k <= num_experts, and with node-limited routing
// groups that divide the experts into groups of at least 2 (torchtitan sums each group's best
// two), 1 <= num_limited_groups <= num_expert_groups, and top_k experts within those groups.
void check_moe_args(const MoEArgs& args);

class MoEImpl : public torch::nn::Module {
 public:
  // Made in torchtitan's order: experts (drawing nothing), router, shared experts. Requires
  // check_moe_args to pass (throws its error otherwise).
  MoEImpl(const MoEArgs& args, int64_t dim, int64_t hidden_dim);
  // x (B, T, D) -> (B, T, D). In training mode, and unless the thread is recomputing a
  // checkpointed block (model/recompute_scope.h), adds the tokens each expert received to
  // tokens_per_expert: once per forward of the step, whatever activation checkpointing
  // recomputes. The weighted sum of a token's expert outputs runs in its routing order.
  at::Tensor forward(const at::Tensor& x);
  // torchtitan's init, in its order: experts, router, shared experts; the buffers to zeros.
  void init_weights(double init_std, const ParamInit& init);
  // This layer's routing state, named `name` ("layers.3.moe").
  ExpertLoad load(const std::string& name) const;

  GroupedExperts experts{nullptr};
  Router router{nullptr};
  FeedForward shared_experts{nullptr};  // null without shared experts
  at::Tensor expert_bias;               // (E) float32 buffer; undefined without load balancing
  at::Tensor tokens_per_expert;         // (E) float32 buffer

 private:
  // The experts' outputs (N x K, D) in routing order combined per token: (N, D).
  at::Tensor combine(const at::Tensor& routed, const at::Tensor& top_scores,
                     at::ScalarType dtype) const;
  MoEArgs args_;
};
TORCH_MODULE(MoE);

// The routing state of the MoE layers among `blocks` (each block's child module "moe", as
// torchtitan names it), in block order, named "layers.<i>.moe".
std::vector<ExpertLoad> expert_loads_of(const torch::nn::ModuleList& blocks);

}  // namespace titan::moe
