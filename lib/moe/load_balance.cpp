#include "moe/load_balance.h"

#include <ATen/ATen.h>

namespace titan::moe {

at::Tensor balance_experts(const std::vector<ExpertLoad>& loads,
                           const SumOverRanks& sum_over_ranks) {
  if (loads.empty()) return {};
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> counts;
  for (const ExpertLoad& l : loads) counts.push_back(l.tokens_per_expert);
  at::Tensor all = at::stack(counts);  // (layers, E): one sum over the ranks for every layer
  sum_over_ranks(all);
  for (size_t i = 0; i < loads.size(); ++i) {
    const ExpertLoad& l = loads[i];
    at::Tensor c = all[static_cast<int64_t>(i)];
    l.tokens_per_expert.copy_(c);
    if (!l.update_expert_bias) continue;
    at::Tensor delta = l.load_balance_coeff * at::sign(c.mean() - c);
    l.expert_bias.add_(delta - delta.mean());
  }
  return all;
}

void reset_expert_counts(const std::vector<ExpertLoad>& loads) {
  at::NoGradGuard no_grad;
  for (const ExpertLoad& l : loads) l.tokens_per_expert.zero_();
}

}  // namespace titan::moe
