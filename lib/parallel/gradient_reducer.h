// Data parallelism's gradient averaging: after the backward, every rank's gradients are summed
// over the ranks (the loss is already divided by the tokens of all ranks, so the sum is the
// global mean), in buckets of about `bucket_bytes`, all in flight together. Not overlapped with
// the backward: on CPU the ranks' compute already takes every core, so there is little to hide
// it behind (README, data parallelism: measured share of the step).
//
// Rank-ordered (debug.batch_invariant): each rank's gradients are its node of the global batch's
// pairwise tree; every rank gathers all nodes bit for bit (an integer sum of their bits, each
// rank's row zero elsewhere) and adds them in the same PairwiseSum, so the result is that of one
// process summing every sequence. It holds world x the gradients' bytes while it runs.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "util/stopwatch.h"

namespace titan {

// The gradient buckets' size: DDP's default (bucket_cap_mb = 25).
constexpr int64_t kGradientBucketBytes = int64_t{25} << 20;

class GradientReducer {
 public:
  // Requires: `params` in the same order on every rank (the model's parameter order), `group`
  // outlives the reducer.
  GradientReducer(ProcessGroup& group, const std::vector<at::Tensor>& params,
                  int64_t bucket_bytes = kGradientBucketBytes, bool rank_ordered = false);

  // Sums every parameter's gradient over the ranks, in place (a parameter without a gradient
  // counts as zeros), and the scalar `loss_sum`. Throws RuntimeFailure naming a rank that is gone.
  void reduce(at::Tensor& loss_sum, int64_t step);

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  int64_t bytes() const { return bytes_; }  // of all gradients
  // The calls to reduce() since the start, and their wall time (waits for slower ranks
  // included).
  const CostMeter& cost() const { return cost_; }
  // The end-of-run log's line on that cost over `steps` steps that took `seconds` (without
  // "[titan] "); none before the first reduce().
  std::vector<std::string> cost_lines(int64_t steps, double seconds) const;

 private:
  ProcessGroup& group_;
  void reduce_in_buckets(at::Tensor& loss_sum, const std::string& what);
  void reduce_in_rank_order(at::Tensor& loss_sum, const std::string& what);

  std::vector<at::Tensor> params_;
  bool rank_ordered_ = false;
  std::vector<std::vector<size_t>> buckets_;  // parameter indices, in order
  int64_t bytes_ = 0;
  CostMeter cost_;
};

}  // namespace titan
