#include "parallel/pairwise_sum.h"

#include <stdexcept>
#include <utility>

namespace titan {

void PairwiseSum::push(std::vector<at::Tensor> parts, int64_t leaves) {
  stack_.push_back({leaves, std::move(parts)});
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].leaves == stack_[stack_.size() - 2].leaves)
    merge_top();
}

void PairwiseSum::merge_top() {
  Node right = std::move(stack_.back());
  stack_.pop_back();
  Node& left = stack_.back();
  for (size_t i = 0; i < left.parts.size(); ++i) left.parts[i].add_(right.parts[i]);
  left.leaves += right.leaves;
}

std::vector<at::Tensor> PairwiseSum::collapse() {
  if (stack_.empty()) throw std::logic_error("PairwiseSum::collapse with nothing pushed");
  // The nodes left have distinct, falling sizes: the smallest are the odd ends of the lowest
  // levels, so they are joined first, from the right.
  while (stack_.size() >= 2) merge_top();
  std::vector<at::Tensor> sum = std::move(stack_.back().parts);
  stack_.clear();
  return sum;
}

}  // namespace titan
