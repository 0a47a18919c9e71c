// One training step, torchtitan's order: zero grads; for each micro-batch, forward and backward
// of loss = summed cross-entropy / tokens in the whole step (over all ranks); with several ranks,
// sum the gradients over them; clip to max_norm; set the LR; AdamW.
// Free of the Trainer's config and data so tests can drive it with their own batches.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <vector>

#include "config/enums.h"
#include "data/loader.h"
#include "model/llama.h"

namespace titan {

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // summed cross-entropy / tokens in the step (NaN/inf passed through)
  double grad_norm = 0;  // total L2 norm before clipping
  double lr = 0;
  bool skipped = false;  // the rerun check dropped the step's update (debug.rerun_action "skip")
};

struct StepOptions {
  c10::Device device = c10::Device(c10::kCPU);
  bool autocast_bf16 = false;  // autocast to bfloat16 (on `device`) around forward and loss
  double max_norm = 1.0;
  GradNormAccumulate grad_norm_accumulate = GradNormAccumulate::kFloat32;
  // Ranks training together: the loss is divided by the tokens of all of them (each rank's
  // micro-batches have the same shape), so that summing gradients over the ranks averages them.
  int64_t data_parallel = 1;
  // Called after the last backward with the step's summed loss (float64, on the device): sums
  // gradients and loss over the ranks. Unset for one process.
  std::function<void(at::Tensor& loss_sum)> reduce_gradients;
  // Called after the last backward, before clipping (the numerics trace reads the gradients).
  std::function<void()> before_clip;
  int64_t step = 0;  // for messages
  // One sequence per forward and backward, their gradients and losses summed in a PairwiseSum
  // over the sequences (debug.batch_invariant); reduce_gradients then gets this rank's node.
  bool batch_invariant = false;
};

// Summed cross-entropy of logits (B, T, V) against labels (B, T), in `dtype`.
at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                at::ScalarType dtype = at::kFloat);

// The tokens the step's loss is divided by: those of `micro_batches` x data_parallel.
double tokens_in_step(const std::vector<Batch>& micro_batches, int64_t data_parallel);

// The step's loss on one micro-batch, as run_step computes it: summed cross-entropy (in
// `loss_dtype`) / tokens_in_step, the forward under options' autocast. Moves the batch to
// options.device.
at::Tensor micro_batch_loss(Transformer& model, const Batch& batch, double tokens_in_step,
                            const StepOptions& options, at::ScalarType loss_dtype = at::kFloat);

// Runs the step on `micro_batches` (each moved to options.device) with learning rate `lr`.
// Requires: params are model's parameters, registered with `optimizer`.
StepResult run_step(Transformer& model, torch::optim::Optimizer& optimizer,
                    const std::vector<at::Tensor>& params, const std::vector<Batch>& micro_batches,
                    double lr, const StepOptions& options);
// run_step turns an allocation failure (libtorch's "DefaultCPUAllocator: can't allocate memory",
// CUDA's out-of-memory error, std::bad_alloc) into a RuntimeFailure naming the step, the phase
// (forward, backward, gradient all-reduce, clipping, optimizer) and the size asked for.

}  // namespace titan
