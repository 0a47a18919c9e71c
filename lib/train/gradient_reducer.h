// Data parallelism's gradient averaging: after the backward, every rank's gradients are summed
// over the ranks (the loss is already divided by the tokens of all ranks, so the sum is the
// global mean), in buckets of about `bucket_bytes` so that large models do not need a second
// copy of all gradients at once and several buckets are in flight together.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace titan {

class GradientReducer {
 public:
  // Requires: `params` in the same order on every rank (the model's parameter order), `group`
  // outlives the reducer.
  GradientReducer(ProcessGroup& group, const std::vector<at::Tensor>& params,
                  int64_t bucket_bytes = int64_t{25} << 20);

  // Sums every parameter's gradient over the ranks, in place (a parameter without a gradient
  // counts as zeros), and the scalar `loss_sum`. Throws RuntimeFailure naming a rank that is gone.
  void reduce(at::Tensor& loss_sum, int64_t step);

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  double last_seconds() const { return last_seconds_; }  // of the latest reduce()

 private:
  ProcessGroup& group_;
  std::vector<at::Tensor> params_;
  std::vector<std::vector<size_t>> buckets_;  // parameter indices, in order
  double last_seconds_ = 0;
};

}  // namespace titan
