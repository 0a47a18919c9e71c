#include "parallel/gradient_reducer.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "parallel/pairwise_sum.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace titan {

GradientReducer::GradientReducer(ProcessGroup& group, const std::vector<at::Tensor>& params,
                                 int64_t bucket_bytes, bool rank_ordered)
    : group_(group), params_(params), rank_ordered_(rank_ordered) {
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
  ScopedSeconds timed(cost_.seconds);
  ++cost_.count;
  const std::string what = fmt::format("the gradient all-reduce of step {}", step);
  if (rank_ordered_) {
    reduce_in_rank_order(loss_sum, what);
  } else {
    reduce_in_buckets(loss_sum, what);
  }
}

void GradientReducer::reduce_in_buckets(at::Tensor& loss_sum, const std::string& what) {
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
}

void GradientReducer::reduce_in_rank_order(at::Tensor& loss_sum, const std::string& what) {
  const int64_t world = group_.size(), rank = group_.rank();
  std::vector<at::Tensor> pieces;
  for (const auto& p : params_) {
    if (p.scalar_type() != at::kFloat) {
      throw RuntimeFailure("batch-invariant gradient sums need float32 parameters",
                           "keep the parameters in float32 (training.mixed_precision_param)");
    }
    pieces.push_back(p.grad().defined() ? p.grad().reshape({-1}) : at::zeros({p.numel()}));
  }
  // Every rank's bits in its own row; the integer sum over ranks adds only zeros to them.
  at::Tensor rows = at::zeros({world, bytes_ / 4}, at::kInt);  // (world, gradient elements)
  rows[rank].copy_(at::cat(pieces).view(at::kInt));
  at::Tensor losses = at::zeros({world}, at::kLong);
  losses[rank].copy_(loss_sum.cpu().to(at::kDouble).reshape({}).view(at::kLong));
  auto pending_rows = group_.start_all_reduce_sum(rows, what);
  auto pending_losses = group_.start_all_reduce_sum(losses, what);
  pending_rows->wait();
  pending_losses->wait();
  PairwiseSum sum;
  for (int64_t r = 0; r < world; ++r) {
    sum.push({rows[r].view(at::kFloat).clone(), losses[r].view(at::kDouble).clone()});
  }
  std::vector<at::Tensor> total = sum.collapse();
  loss_sum = total[1].reshape({}).to(loss_sum.device());
  int64_t offset = 0;
  for (auto& param : params_) {
    const int64_t n = param.numel();
    param.mutable_grad() = total[0].narrow(0, offset, n).view(param.sizes()).clone();
    offset += n;
  }
}

std::vector<std::string> GradientReducer::cost_lines(int64_t steps, double seconds) const {
  if (cost_.count == 0) return {};
  return {fmt::format(
      "gradient all-reduce: mean {:.1f} ms per step, {:.1f}% of the step time "
      "({:.1f} MiB in {} bucket{}, after the backward; waits for slower ranks included)",
      1e3 * cost_.per_count(), 100.0 * cost_.per_count() * static_cast<double>(steps) / seconds,
      static_cast<double>(bytes_) / (1 << 20), buckets(), buckets() == 1 ? "" : "s")};
}

}  // namespace titan
