#include "moe/moe.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "model/recompute_scope.h"

namespace titan::moe {

void check_moe_args(const MoEArgs& a) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (a.score_func != "softmax" && a.score_func != "sigmoid")
    fail("score_func \"" + a.score_func + "\" is neither softmax nor sigmoid");
  if (a.num_experts < 1 || a.top_k < 1 || a.top_k > a.num_experts) {
    fail(fmt::format("top_k {} of {} experts: each token needs 1 to num_experts experts", a.top_k,
                     a.num_experts));
  }
  if (a.num_shared_experts < 0) fail("num_shared_experts is negative");
  if (!a.num_expert_groups) return;
  const int64_t groups = *a.num_expert_groups;
  if (groups < 1 || a.num_experts % groups != 0 || a.num_experts / groups < 2) {
    fail(fmt::format("num_expert_groups {} does not divide {} experts into groups of 2 or more",
                     groups, a.num_experts));
  }
  const int64_t limited = a.num_limited_groups.value_or(0);
  if (limited < 1 || limited > groups) {
    fail(
        fmt::format("num_limited_groups {} of {} groups: node-limited routing keeps 1 to "
                    "num_expert_groups of them",
                    limited, groups));
  }
  if (limited * (a.num_experts / groups) < a.top_k) {
    fail(fmt::format("top_k {} exceeds the {} experts of {} limited groups", a.top_k,
                     limited * (a.num_experts / groups), limited));
  }
}

MoEImpl::MoEImpl(const MoEArgs& args, int64_t dim, int64_t hidden_dim) : args_(args) {
  check_moe_args(args);
  experts = register_module("experts",
                            GroupedExperts(dim, hidden_dim, args.num_experts, args.bf16_experts));
  router = register_module("router", Router(dim, args));
  if (args.num_shared_experts > 0) {
    shared_experts =
        register_module("shared_experts", FeedForward(dim, hidden_dim * args.num_shared_experts));
  }
  if (args.load_balance_coeff)
    expert_bias = register_buffer("expert_bias", at::zeros({args.num_experts}, at::kFloat));
  tokens_per_expert =
      register_buffer("tokens_per_expert", at::zeros({args.num_experts}, at::kFloat));
}

at::Tensor MoEImpl::forward(const at::Tensor& x) {
  const auto B = x.size(0), T = x.size(1), D = x.size(2), K = args_.top_k;
  auto flat = x.reshape({B * T, D});  // (N, D)
  Routing r = router(flat, expert_bias);
  // The N x K choices grouped by expert, in token order within an expert (a stable sort), and
  // the inverse permutation that puts the experts' outputs back in choice order. Both are
  // permutations: their gradients scatter without collisions. The counts come from the sorted
  // ids (a bincount's atomics are refused under deterministic algorithms on CUDA).
  auto [sorted_ids, order] = at::sort(r.selected.reshape(-1), /*stable=*/true, 0, false);  // (N*K)
  const at::Tensor counts =
      at::searchsorted(sorted_ids, at::arange(args_.num_experts + 1, sorted_ids.options())).diff();
  if (is_training() && !recomputing()) {
    // Bookkeeping, not computation: hidden from the op traces, which must see the same ops in
    // the forward and in its recomputation.
    at::DisableRecordFunctionGuard hidden;
    at::NoGradGuard no_grad;
    tokens_per_expert.add_(counts.to(tokens_per_expert.options()));
  }
  auto inverse =
      at::empty_like(order).scatter_(0, order, at::arange(order.numel(), order.options()));
  auto routed =
      flat.unsqueeze(1).expand({B * T, K, D}).reshape({B * T * K, D}).index_select(0, order);
  if (args_.score_before_experts) {
    auto scores = r.top_scores.reshape(-1).index_select(0, order).unsqueeze(1);  // (N*K, 1)
    routed = (routed.to(at::kFloat) * scores).to(x.scalar_type());
  }
  const at::Tensor host_counts = counts.cpu();
  const int64_t* c = host_counts.data_ptr<int64_t>();
  const std::vector<int64_t> rows(c, c + host_counts.numel());
  auto out = experts(routed, rows).index_select(0, inverse);  // (N*K, D), choice order
  out = combine(out.view({B * T, K, D}), r.top_scores, x.scalar_type());
  if (shared_experts) out = shared_experts(flat) + out;
  return out.view({B, T, D});
}

at::Tensor MoEImpl::combine(const at::Tensor& routed, const at::Tensor& top_scores,
                            at::ScalarType dtype) const {
  // torchtitan sums over K with bmm (scores after the experts) or sum(dim=1): here the same sums
  // one choice at a time, best first, the same order on every device.
  const int64_t K = routed.size(1);
  at::Tensor out;
  for (int64_t k = 0; k < K; ++k) {
    at::Tensor term = routed.select(1, k);  // (N, D)
    if (!args_.score_before_experts) term = top_scores.narrow(1, k, 1) * term.to(at::kFloat);
    out = k == 0 ? term : out + term;
  }
  return out.to(dtype);
}

void MoEImpl::init_weights(double init_std, const ParamInit& init) {
  experts->init_weights(init_std, init);
  router->init_weights(init_std, init);
  if (shared_experts) {
    init(shared_experts->w1->weight, [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); });
    for (auto* w : {&shared_experts->w2->weight, &shared_experts->w3->weight})
      init(*w, [&](at::Tensor& t) { trunc_normal_(t, 0.0, init_std, -2.0, 2.0); });
  }
  tokens_per_expert.zero_();
  if (expert_bias.defined()) expert_bias.zero_();
}

ExpertLoad MoEImpl::load(const std::string& name) const {
  ExpertLoad l;
  l.name = name;
  l.tokens_per_expert = tokens_per_expert;
  l.expert_bias = expert_bias;
  l.load_balance_coeff = args_.load_balance_coeff.value_or(0.0);
  l.update_expert_bias = args_.update_expert_bias && expert_bias.defined();
  return l;
}

}  // namespace titan::moe

namespace titan::moe {

std::vector<ExpertLoad> expert_loads_of(const torch::nn::ModuleList& blocks) {
  std::vector<ExpertLoad> out;
  for (size_t i = 0; i < blocks->size(); ++i) {
    for (const auto& child : blocks->ptr(i)->named_children()) {
      if (child.key() != "moe") continue;
      out.push_back(child.value()->as<MoE>()->load("layers." + std::to_string(i) + ".moe"));
    }
  }
  return out;
}

}  // namespace titan::moe
