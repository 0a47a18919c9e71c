// The training step, torchtitan's order, and the one place a forward and backward is written:
// drop the last step's gradients; for each micro-batch, forward and backward of loss = summed
// cross-entropy / tokens in the whole step (over all ranks); with several ranks, sum the gradients
// over them; clip to max_norm; set the LR; AdamW. Every execution of a step goes through run_step:
// the run's own, the rerun check's re-executions, precision attribution's executions on model
// copies and each sequence's loss for a report, so that "executed again" means "the same code
// again".
//
// Observers (the instruments, lib/instruments) watch an execution at fixed points and add what
// they measured to its outcome; the step knows nothing of what they do.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "config/enums.h"
#include "data/loader.h"
#include "distributed/process_group.h"
#include "model/model.h"
#include "parallel/data_parallel.h"
#include "step/step_findings.h"

namespace titan {

// How a run's steps compute; fixed for the run.
struct StepOptions {
  c10::Device device = c10::Device(c10::kCPU);
  bool autocast_bf16 = false;  // autocast to bfloat16 (on `device`) around forward and loss
  double max_norm = 1.0;
  GradNormAccumulate grad_norm_accumulate = GradNormAccumulate::kFloat32;
  // Ranks training together: the loss is divided by the tokens of all of them (each rank's
  // micro-batches have the same shape), so that summing gradients over the ranks averages them.
  int64_t data_parallel = 1;
  // debug.batch_invariant: each sequence is a forward and backward of its own, their gradients
  // and losses summed in a PairwiseSum over the sequences; the reducer then gets this rank's
  // node of the tree.
  bool batch_invariant = false;
};

// What a step executes.
enum class StepMode {
  kTrain,      // forward, backward, the sum over ranks, clipping, the optimizer: the run's step
  kGradients,  // forward and backward only: gradients left in place, grad_norm computed unclipped
  kLosses,     // each sequence's mean loss, without gradients or dropout
  kEvaluate,   // each batch's loss as the step defines it, without gradients or dropout, averaged
               // over the batches and summed over the ranks (validation)
};

// The model a step runs on.
struct StepTarget {
  Model model{nullptr};
  std::vector<at::Tensor> params;                // the model's, in its order
  torch::optim::Optimizer* optimizer = nullptr;  // needed by kTrain
  // How the ranks share the work: the sums over them, clipping over the shards, the model's
  // state under FSDP. Null: one process holding the whole model (one_process).
  DataParallel* parallel = nullptr;
};

struct StepRequest {
  int64_t step = 0;
  const std::vector<Batch>* batches = nullptr;
  double lr = 0;
  StepMode mode = StepMode::kTrain;
  at::ScalarType loss_dtype = at::kFloat;  // of the cross-entropy (precision reference: float64)
  bool max_loss_over_ranks = false;        // kTrain with several ranks: gather each rank's loss
};

struct StepTimings {
  double forward_backward = 0;
  double reduce = 0;  // the sum over ranks (waits for slower ranks included)
  double clip = 0;
  double update = 0;
};

// What one execution of a step computed, and what its observers measured.
struct StepOutcome {
  int64_t step = 0;
  double loss = 0;       // summed cross-entropy / tokens in the step (NaN/inf passed through)
  double grad_norm = 0;  // total L2 norm before clipping
  double lr = 0;
  double max_loss = 0;   // the largest rank's own loss (the loss itself for one process)
  bool skipped = false;  // the rerun check dropped the step's update (debug.rerun_action "skip")
  std::vector<at::Tensor> sequence_losses;  // kLosses: per micro-batch, (B) float64 on the CPU
  int64_t tokens = 0;                       // kEvaluate: the tokens evaluated on this rank
  // kTrain of an MoE model: (MoE layers, experts) float32, the tokens each expert received in the
  // step over all ranks (model->expert_loads() order); undefined otherwise.
  at::Tensor tokens_per_expert;
  StepTimings timings;
  // Added by observers, each under its own type (LayerNorms, NumericsStep, Validated: see the
  // instrument that adds it).
  StepFindings findings;
};

// Watches executions of steps. Every hook has a default that does nothing.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Before anything of the step runs (the last step's gradients not yet dropped).
  virtual void step_starting(const StepRequest& request) {}
  // Before each forward: a micro-batch, or under batch_invariant one sequence.
  virtual void forward_starting(int64_t index) {}
  // After the last backward and the sum over ranks, before clipping (kTrain and kGradients).
  virtual void gradients_ready(const StepRequest& request) {}
  // After the update (or the last forward for the other modes): adds to `outcome`.
  virtual void step_finished(const StepRequest& request, StepOutcome& outcome) {}
};

// Summed cross-entropy of logits (B, T, V) against labels (B, T), in `dtype`.
at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                at::ScalarType dtype = at::kFloat);

// The tokens the step's loss is divided by: those of `micro_batches` x data_parallel.
double tokens_in_step(const std::vector<Batch>& micro_batches, int64_t data_parallel);

// Executes `request` on `target` (each batch moved to options.device), calling `observers` in
// order at each point. kTrain requires target.optimizer (holding target.params). kTrain and
// kGradients first drop the gradients of target.params (kTrain: of every parameter the optimizer
// steps). Throws RuntimeFailure for an allocation failure, naming the step, the phase (forward,
// backward, gradient all-reduce, gradient clipping, optimizer step) and the size asked for.
StepOutcome run_step(const StepTarget& target, const StepOptions& options,
                     const StepRequest& request, const std::vector<StepObserver*>& observers = {});

}  // namespace titan
