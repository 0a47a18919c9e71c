// One FSDP unit (torchtitan's: a transformer block; the embedding; the final norm with the
// output): its parameters split over a shard group as UnitLayout says. The parameters stay the
// tensors the module computes with, but they hold memory only between gather() and release();
// this rank's segment of them is shard(), the leaf the optimizer steps.
//
//   unit.gather();                   // before the unit's forward
//   out = unit.after_forward(block(x));
//   ... loss.backward() ...          // re-gathers before the unit's backward, then
//                                    // reduce-scatters its gradients into shard().grad()
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/shard_layout.h"

namespace titan {

class ShardedUnit {
 public:
  // Requires: `params` (leaves, one dtype and device) hold the same values on every rank of
  // `group`, or all hold no memory (shape_only, model/param_storage.h); `group` outlives the
  // unit. Keeps this rank's segment of their values as shard() (zeros for shape-only ones, until
  // load_rows) and releases their storage. Every rank builds its units in the same order.
  ShardedUnit(ProcessGroup& group, std::vector<at::Tensor> params, std::string name);
  ShardedUnit(const ShardedUnit&) = delete;
  ShardedUnit& operator=(const ShardedUnit&) = delete;

  // The parameters' full values back in their storage, from every rank's shard (one all-gather
  // of the unit). Nothing when they are gathered already.
  void gather();
  // Starts the all-gather that gather() completes, so that it moves while something else
  // computes (FSDP's prefetch). Nothing when gathered or started already.
  void prefetch();
  // The unit whose all-gather to start once this unit's backward has gathered (the one whose
  // backward comes next); null: none.
  void set_backward_prefetch(ShardedUnit* next) { backward_prefetch_ = next; }
  // Releases the parameters' storage (nothing when released already).
  void release();
  bool gathered() const { return gathered_; }

  // Call on the unit's forward output. Releases the parameters (unless `reshard` is false: FSDP's
  // reshard_after_forward) and arranges the backward: a hook on `output` re-gathers them before
  // the unit's own backward runs, and once every parameter's gradient is in, the gradients are
  // summed over the ranks into shard().grad() (added to what is there: micro-batches
  // accumulate), and the parameters' gradients and storage are released. Returns `output`.
  at::Tensor after_forward(const at::Tensor& output, bool reshard = true);

  // Whether the backward sums the gradients over the ranks (the default). Without, the full
  // gradients stay in the parameters for the caller to reduce (debug.batch_invariant sums every
  // sequence's in one tree first); the storage is still released after the backward.
  void set_reduce_in_backward(bool reduce) { reduce_in_backward_ = reduce; }
  // The dtype the gradients are reduce-scattered in (FSDP's reduce_dtype,
  // training.mixed_precision_reduce): float32 by default; bfloat16 moves half the bytes and sums
  // in bfloat16, the sums added to the float32 shard gradient.
  void set_reduce_dtype(at::ScalarType dtype) { reduce_dtype_ = dtype; }
  at::ScalarType reduce_dtype() const { return reduce_dtype_; }
  // The dtype the parameters are all-gathered in (FSDP's param_dtype, mixed_precision_param):
  // float32 (exact) by default; bfloat16 moves half the bytes, and the module computes with the
  // bfloat16 values (held in the parameters' float32 storage). Takes effect at the next gather.
  void set_param_dtype(at::ScalarType dtype) { param_dtype_ = dtype; }
  at::ScalarType param_dtype() const { return param_dtype_; }

  // Rows [first_row, first_row + values.size(0)) of parameter `i` are `values`: the shard keeps
  // the ones this rank holds. Requires: released, and the rows fit the parameter (check_rows_fit).
  void load_rows(size_t i, int64_t first_row, const at::Tensor& values);

  // This rank's segment of the parameters: (layout().segment_numel(),), requires grad.
  const at::Tensor& shard() const { return shard_; }
  const UnitLayout& layout() const { return layout_; }
  // The unit's parameters, the tensors the module computes with.
  const std::vector<at::Tensor>& params() const { return params_; }
  const std::string& name() const { return name_; }

  // Wall time spent waiting for this unit's all-gathers and reduce-scatters since it was built.
  struct CollectiveSeconds {
    double gather_wait = 0;
    double reduce_scatter = 0;
  };
  const CollectiveSeconds& collective_seconds() const { return seconds_; }

 private:
  void gradient_arrived();
  void reduce_gradients();

  ProcessGroup& group_;
  std::vector<at::Tensor> params_;
  std::string name_;
  UnitLayout layout_;
  at::Tensor shard_;
  // The parameters' AccumulateGrad nodes, which carry the hooks: a parameter holds its node only
  // weakly, and one made again between backward passes would have none.
  std::vector<std::shared_ptr<void>> accumulators_;
  bool gathered_ = true;
  std::unique_ptr<PendingCollective> pending_gather_;  // prefetch()'s, with its buffer
  at::Tensor gather_buffer_;
  at::Tensor gather_input_;  // the shard in param_dtype_, alive until the all-gather is done
  ShardedUnit* backward_prefetch_ = nullptr;
  CollectiveSeconds seconds_;
  bool reduce_in_backward_ = true;
  at::ScalarType reduce_dtype_ = at::kFloat;
  at::ScalarType param_dtype_ = at::kFloat;
  size_t gradients_in_ = 0;
  int64_t backward_passes_ = 0;
};

}  // namespace titan
