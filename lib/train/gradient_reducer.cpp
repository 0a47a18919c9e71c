#include "train/gradient_reducer.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "util/stopwatch.h"

namespace titan {

GradientReducer::GradientReducer(ProcessGroup& group, const std::vector<at::Tensor>& params,
                                 int64_t bucket_bytes)
    : group_(group), params_(params) {
  int64_t bytes = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buckets_.empty() || bytes >= bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(i);
    bytes += params_[i].numel() * static_cast<int64_t>(params_[i].element_size());
    bytes_ += params_[i].numel() * static_cast<int64_t>(params_[i].element_size());
  }
}

void GradientReducer::reduce(at::Tensor& loss_sum, int64_t step) {
  const auto start = SteadyClock::now();
  const std::string what = fmt::format("the gradient all-reduce of step {}", step);
  std::vector<at::Tensor> flat;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  for (const auto& bucket : buckets_) {
    std::vector<at::Tensor> pieces;
    for (size_t i : bucket) {
      const at::Tensor& grad = params_[i].grad();
      pieces.push_back(grad.defined() ? grad.reshape({-1})
                                      : at::zeros({params_[i].numel()}, params_[i].options()));
    }
    flat.push_back(at::cat(pieces));  // (sum of numel,)
    pending.push_back(group_.start_all_reduce_sum(flat.back(), what));
  }
  at::Tensor loss = loss_sum.reshape({1}).clone();
  pending.push_back(group_.start_all_reduce_sum(loss, what));
  for (auto& p : pending) p->wait();
  loss_sum = loss.reshape({});
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t offset = 0;
    for (size_t i : buckets_[b]) {
      at::Tensor& param = params_[i];
      const int64_t n = param.numel();
      at::Tensor reduced = flat[b].narrow(0, offset, n).view(param.sizes());
      if (param.grad().defined()) {
        param.mutable_grad().copy_(reduced);
      } else {
        param.mutable_grad() = reduced.clone();
      }
      offset += n;
    }
  }
  total_seconds_ += seconds_since(start);
  ++reductions_;
}

}  // namespace titan
