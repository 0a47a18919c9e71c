#include "moe/router.h"

#include <limits>

#include "model/linear.h"
#include "model/model.h"

namespace titan::moe {

at::Tensor top_k_indices(const at::Tensor& values, int64_t k) {
  // A stable descending sort keeps equal values in column order: the lower index first.
  return std::get<1>(at::sort(values, /*stable=*/true, /*dim=*/-1, /*descending=*/true))
      .narrow(-1, 0, k);
}

RouterImpl::RouterImpl(int64_t dim, const MoEArgs& args) : args_(args) {
  gate = register_module(
      "gate",
      torch::nn::Linear(torch::nn::LinearOptions(dim, args.num_experts).bias(args.gate_bias)));
}

at::Tensor RouterImpl::limit_to_groups(const at::Tensor& scores_for_choice) const {
  const int64_t groups = *args_.num_expert_groups;
  const int64_t per_group = args_.num_experts / groups;
  auto grouped = scores_for_choice.view({-1, groups, per_group});  // (N, G, E/G)
  auto best_two = std::get<0>(at::sort(grouped, true, -1, true)).narrow(-1, 0, 2);
  auto group_scores = best_two.sum(-1);  // (N, G)
  auto kept = top_k_indices(group_scores, *args_.num_limited_groups);
  auto dropped =
      at::ones_like(group_scores, group_scores.options().dtype(at::kBool)).scatter_(1, kept, false);
  return grouped.masked_fill(dropped.unsqueeze(-1), -std::numeric_limits<float>::infinity())
      .view({-1, args_.num_experts});
}

Routing RouterImpl::forward(const at::Tensor& x, const at::Tensor& expert_bias) {
  Routing r;
  auto logits = linear(gate, x).to(at::kFloat);  // (N, E), float32 as torchtitan's
  r.scores = args_.score_func == "softmax" ? at::softmax(logits, 1) : at::sigmoid(logits);
  if (args_.force_load_balance) {
    // torchtitan's _debug_force_load_balance: choice n*K + k goes to expert (n*K + k) mod E.
    const int64_t n = x.size(0), k = args_.top_k;
    r.selected =
        at::arange(n * k, x.options().dtype(at::kLong)).view({n, k}).remainder(args_.num_experts);
  } else {
    at::Tensor for_choice = expert_bias.defined() ? r.scores + expert_bias : r.scores;
    if (args_.num_expert_groups) for_choice = limit_to_groups(for_choice);
    r.selected = top_k_indices(for_choice.detach(), args_.top_k);
  }
  r.top_scores = r.scores.gather(1, r.selected);  // (N, K)
  if (args_.route_norm) r.top_scores = r.top_scores / (r.top_scores.sum(-1, true) + 1e-20);
  r.top_scores = r.top_scores * args_.route_scale;
  return r;
}

void RouterImpl::init_weights(double init_std, const ParamInit& init) {
  init(gate->weight, [&](at::Tensor& t) { trunc_normal_(t, 0.0, init_std, -2.0, 2.0); });
}

}  // namespace titan::moe
