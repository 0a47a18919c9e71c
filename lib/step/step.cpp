#include "step/step.h"

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <new>
#include <optional>
#include <string>

#include "moe/load_balance.h"
#include "optim/optimizer.h"
#include "parallel/pairwise_sum.h"
#include "util/autocast.h"
#include "util/blas_threads.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

// Runs one phase of step `step`; an allocation failure in it becomes a RuntimeFailure that says
// where it happened.
constexpr const char* kTrainingMemoryHint =
    "lower training.local_batch_size or training.seq_len (global_batch_size keeps the batch by "
    "accumulating gradients), or use activation_checkpoint.mode = \"full\"";
constexpr const char* kValidationMemoryHint =
    "lower validation.local_batch_size or validation.seq_len (validation.steps validates more "
    "batches, one at a time)";

template <class Fn>
auto in_phase(const char* phase, int64_t step, Fn fn, const char* hint = kTrainingMemoryHint)
    -> decltype(fn()) {
  auto fail = [&](const std::string& message) {
    std::string size;
    is_allocation_failure(message, &size);
    return OutOfMemory(
        fmt::format("out of memory at step {}, in the {}{}", step, phase,
                    size.empty() ? std::string() : " (an allocation of " + size + ")"),
        hint);
  };
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    throw fail("");
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (!is_allocation_failure(message)) throw;
    throw fail(message);
  }
}

// The forwards of a step: each micro-batch, or under batch_invariant each sequence alone as a
// (1, T) batch, so that every row's arithmetic is that of one sequence whatever the split.
std::vector<Batch> forwards_of(const std::vector<Batch>& batches, bool per_sequence) {
  if (!per_sequence) return batches;
  std::vector<Batch> out;
  for (const auto& batch : batches) {
    for (int64_t b = 0; b < batch.inputs.size(0); ++b) {
      Batch one;
      one.inputs = batch.inputs.narrow(0, b, 1);
      one.labels = batch.labels.narrow(0, b, 1);
      out.push_back(std::move(one));
    }
  }
  return out;
}

// Each parameter's gradient, taken out of the parameter (zeros for one without), and the loss.
std::vector<at::Tensor> take_gradients(const std::vector<at::Tensor>& params, at::Tensor loss) {
  std::vector<at::Tensor> parts;
  parts.reserve(params.size() + 1);
  for (const auto& p : params) {
    at::Tensor& grad = const_cast<at::Tensor&>(p).mutable_grad();
    parts.push_back(grad.defined() ? grad : at::zeros_like(p));
    grad = at::Tensor();
  }
  parts.push_back(std::move(loss));
  return parts;
}

// The model's logits for `batch`, under the run's autocast, and the loss `reduce` makes of them
// (inside the autocast scope too): the one forward of every mode.
template <class Reduce>
at::Tensor forward(Model model, const Batch& batch, const StepOptions& options, Reduce reduce) {
  auto inputs = batch.inputs.to(options.device), labels = batch.labels.to(options.device);
  AutocastScope autocast(options.device.type(), options.autocast_bf16, at::kBFloat16);
  return reduce(model->forward(inputs), labels);  // logits (B, T, V)
}

// Without gradients or dropout (the batches' own difficulty): per micro-batch, each sequence's
// mean cross-entropy (B) (kLosses), or the batch's summed cross-entropy / its tokens x
// data_parallel (kEvaluate), float64 on the CPU.
std::vector<at::Tensor> evaluate(const StepTarget& target, const StepOptions& options,
                                 const StepRequest& request,
                                 const std::vector<StepObserver*>& observers) {
  at::NoGradGuard no_grad;
  Model model = target.model;
  model->eval();
  std::vector<at::Tensor> out;
  const auto& batches = *request.batches;
  const bool per_sequence = request.mode == StepMode::kLosses;
  for (size_t m = 0; m < batches.size(); ++m) {
    for (auto* o : observers) o->forward_starting(static_cast<int64_t>(m));
    const double tokens = tokens_in_step({batches[m]}, options.data_parallel);
    const bool validating = request.mode == StepMode::kEvaluate;
    const char* phase = validating ? "validation's forward" : "forward";
    const char* hint = validating ? kValidationMemoryHint : kTrainingMemoryHint;
    out.push_back(in_phase(
        phase, request.step,
        [&] {
          return forward(
              model, batches[m], options, [&](const at::Tensor& logits, const at::Tensor& labels) {
                if (!per_sequence) {
                  return (summed_cross_entropy(logits, labels, request.loss_dtype) / tokens)
                      .to(at::kDouble)
                      .cpu();
                }
                auto per_token =
                    at::cross_entropy_loss(logits.flatten(0, 1).to(at::kFloat),
                                           labels.flatten(0, 1), {}, at::Reduction::None);
                return per_token.view(labels.sizes()).to(at::kDouble).mean(1).cpu();  // (B)
              });
        },
        hint));
  }
  model->train();
  return out;
}

// kEvaluate's outcome: the mean over batches of each batch's loss summed over the ranks (each
// rank's is over the tokens of all of them: the sum is the batch's mean over all ranks' tokens).
double mean_over_batches(DataParallel& parallel, const std::vector<at::Tensor>& losses) {
  if (losses.empty()) return 0;
  at::Tensor all = at::stack(losses).reshape({-1});  // (batches) float64
  parallel.sum_over_ranks(all, "the validation losses");
  return all.sum().item<double>() / static_cast<double>(losses.size());
}

// Forward and backward of every forward of the step; leaves the step's gradients in the
// parameters (this rank's node of the pairwise tree under batch_invariant) and returns the
// summed loss (float64, on the device).
at::Tensor forward_and_backward(const StepTarget& target, const StepOptions& options,
                                const StepRequest& request,
                                const std::vector<StepObserver*>& observers) {
  const double tokens = tokens_in_step(*request.batches, options.data_parallel);
  const bool per_sequence = options.batch_invariant;
  // OpenBLAS splits a matmul's work by its thread count, and some kernel sets (Haswell's) then
  // round differently: batch-invariant steps run the BLAS on one thread, so that their bits do
  // not depend on training.cpu_threads (titan's own kernels split rows, never a sum).
  std::optional<SingleThreadedBlasScope> one_blas_thread;
  if (per_sequence) one_blas_thread.emplace();
  at::Tensor loss_sum =
      at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(options.device));
  PairwiseSum tree;
  const std::vector<Batch> forwards = forwards_of(*request.batches, per_sequence);
  for (size_t i = 0; i < forwards.size(); ++i) {
    for (auto* o : observers) o->forward_starting(static_cast<int64_t>(i));
    at::Tensor loss = in_phase("forward", request.step, [&] {
      return forward(target.model, forwards[i], options,
                     [&](const at::Tensor& logits, const at::Tensor& labels) {
                       return summed_cross_entropy(logits, labels, request.loss_dtype) / tokens;
                     });
    });
    in_phase("backward", request.step, [&] { loss.backward(); });
    if (per_sequence) {
      tree.push(take_gradients(target.params, loss.detach().to(at::kDouble)));
    } else {
      loss_sum += loss.detach().to(at::kDouble);
    }
  }
  if (!per_sequence) return loss_sum;
  std::vector<at::Tensor> node = tree.collapse();
  for (size_t i = 0; i < target.params.size(); ++i)
    const_cast<at::Tensor&>(target.params[i]).mutable_grad() = node[i];
  return node.back();
}

// Sums gradients and loss over the ranks; with `max_loss`, also each rank's own loss (its summed
// loss is over the tokens of all ranks): returns the largest.
double reduce_over_ranks(DataParallel& parallel, at::Tensor& loss_sum, int64_t step,
                         bool max_loss) {
  at::Tensor per_rank;
  if (max_loss) {
    const auto world = parallel.ranks();
    per_rank = at::zeros({world}, at::kDouble);
    per_rank[parallel.rank()] = loss_sum.cpu() * static_cast<double>(world);
  }
  parallel.reduce_gradients(loss_sum, step);
  if (!max_loss) return 0;
  parallel.sum_over_ranks(per_rank, "the ranks' losses");
  return per_rank.max().item<double>();
}

std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  return grads;
}

}  // namespace

at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                at::ScalarType dtype) {
  return at::cross_entropy_loss(logits.flatten(0, 1).to(dtype), labels.flatten(0, 1), {},
                                at::Reduction::Sum);
}

double tokens_in_step(const std::vector<Batch>& micro_batches, int64_t data_parallel) {
  double tokens = 0;
  for (const auto& batch : micro_batches) tokens += static_cast<double>(batch.labels.numel());
  return tokens * static_cast<double>(data_parallel);
}

StepOutcome run_step(const StepTarget& target, const StepOptions& options,
                     const StepRequest& request, const std::vector<StepObserver*>& observers) {
  std::unique_ptr<DataParallel> alone;
  if (!target.parallel) alone = one_process(target.model, target.params, nullptr);
  DataParallel& parallel = target.parallel ? *target.parallel : *alone;
  StepOutcome out;
  out.step = request.step;
  out.lr = request.lr;
  for (auto* o : observers) o->step_starting(request);
  const std::vector<ExpertLoad> expert_loads = target.model->expert_loads();
  moe::reset_expert_counts(expert_loads);
  if (request.mode == StepMode::kLosses || request.mode == StepMode::kEvaluate) {
    std::vector<at::Tensor> losses = evaluate(target, options, request, observers);
    if (request.mode == StepMode::kEvaluate) {
      out.loss = mean_over_batches(parallel, losses);
      for (const auto& b : *request.batches) out.tokens += b.labels.numel();
    } else {
      out.sequence_losses = std::move(losses);
    }
    for (auto* o : observers) o->step_finished(request, out);
    return out;
  }
  const bool train = request.mode == StepMode::kTrain;
  if (train) {
    set_learning_rate(*target.optimizer, request.lr);
    for (const auto& group : target.optimizer->param_groups()) drop_gradients(group.params());
  }
  drop_gradients(target.params);
  at::Tensor loss_sum;
  {
    ScopedSeconds timed(out.timings.forward_backward);
    loss_sum = forward_and_backward(target, options, request, observers);
  }
  if (train && parallel.ranks() > 1) {
    ScopedSeconds timed(out.timings.reduce);
    out.max_loss = in_phase("gradient all-reduce", request.step, [&] {
      return reduce_over_ranks(parallel, loss_sum, request.step, request.max_loss_over_ranks);
    });
  }
  for (auto* o : observers) o->gradients_ready(request);
  {
    ScopedSeconds timed(out.timings.clip);
    out.grad_norm = in_phase("gradient clipping", request.step, [&] {
      return train ? parallel.clip_gradients(options.max_norm, options.grad_norm_accumulate)
                   : gradient_norm(gradients_of(target.params), options.grad_norm_accumulate);
    });
  }
  out.loss = loss_sum.item<double>();
  if (!request.max_loss_over_ranks) out.max_loss = out.loss;
  if (train) {
    ScopedSeconds timed(out.timings.update);
    // torchtitan's optimizer pre-hook: the experts' load, summed over the ranks, moves their
    // biases before the update.
    out.tokens_per_expert = moe::balance_experts(expert_loads, [&](at::Tensor& counts) {
      parallel.sum_over_ranks(counts, "the tokens per expert");
    });
    in_phase("optimizer step", request.step, [&] { target.optimizer->step(); });
  }
  for (auto* o : observers) o->step_finished(request, out);
  return out;
}

}  // namespace titan
