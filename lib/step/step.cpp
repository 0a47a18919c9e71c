#include "step/step.h"

#include <fmt/format.h>

#include <new>
#include <regex>
#include <string>

#include "optim/optimizer.h"
#include "step/pairwise_sum.h"
#include "util/autocast.h"
#include "util/error.h"

namespace titan {
namespace {

// The size an allocator's message says was asked for ("you tried to allocate 123 bytes",
// CUDA's "Tried to allocate 2.00 GiB"), or "" when it says none.
std::string size_asked(const std::string& message) {
  static const std::regex bytes("allocate ([0-9]+) bytes"), cuda("allocate ([0-9.]+ [KMGT]?i?B)");
  std::smatch m;
  if (std::regex_search(message, m, bytes)) {
    return fmt::format("{:.2f} GiB", std::stod(m[1].str()) / (1024.0 * 1024.0 * 1024.0));
  }
  if (std::regex_search(message, m, cuda)) return m[1].str();
  return "";
}

// Runs one phase of the step; an allocation failure in it becomes a RuntimeFailure that says
// where it happened.
template <class Fn>
auto in_phase(const char* phase, const StepOptions& options, Fn fn) -> decltype(fn()) {
  auto fail = [&](const std::string& message) {
    const std::string size = size_asked(message);
    return RuntimeFailure(
        fmt::format("out of memory at step {}, in the {}{}", options.step, phase,
                    size.empty() ? std::string() : " (an allocation of " + size + ")"),
        "lower training.local_batch_size or training.seq_len (global_batch_size keeps the "
        "batch by accumulating gradients), or use activation_checkpoint.mode = \"full\"");
  };
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    throw fail("");
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (message.find("can't allocate memory") == std::string::npos &&
        message.find("out of memory") == std::string::npos) {
      throw;
    }
    throw fail(message);
  }
}

// Sequence b of `batch` as a batch of its own: (1, T).
Batch one_sequence(const Batch& batch, int64_t b) {
  Batch one;
  one.inputs = batch.inputs.narrow(0, b, 1);
  one.labels = batch.labels.narrow(0, b, 1);
  return one;
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

// Forward and backward of every sequence alone, in order: each row's arithmetic is then that of
// a (1, T) batch whatever the split, and the sums over rows are those of the pairwise tree over
// the sequences. Leaves this rank's node in the parameters' gradients; returns its loss.
at::Tensor backward_sequences_pairwise(Transformer& model, const std::vector<at::Tensor>& params,
                                       const std::vector<Batch>& micro_batches, double tokens,
                                       const StepOptions& options) {
  PairwiseSum sum;
  for (const auto& batch : micro_batches) {
    for (int64_t b = 0; b < batch.inputs.size(0); ++b) {
      at::Tensor loss = in_phase("forward", options, [&] {
        return micro_batch_loss(model, one_sequence(batch, b), tokens, options);
      });
      in_phase("backward", options, [&] { loss.backward(); });
      sum.push(take_gradients(params, loss.detach().to(at::kDouble)));
    }
  }
  std::vector<at::Tensor> node = sum.collapse();
  for (size_t i = 0; i < params.size(); ++i)
    const_cast<at::Tensor&>(params[i]).mutable_grad() = node[i];
  return node.back();
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

at::Tensor micro_batch_loss(Transformer& model, const Batch& batch, double tokens_in_step,
                            const StepOptions& options, at::ScalarType loss_dtype) {
  auto inputs = batch.inputs.to(options.device), labels = batch.labels.to(options.device);
  AutocastScope autocast(options.device.type(), options.autocast_bf16, at::kBFloat16);
  return summed_cross_entropy(model->forward(inputs), labels, loss_dtype) / tokens_in_step;
}

StepResult run_step(Transformer& model, torch::optim::Optimizer& optimizer,
                    const std::vector<at::Tensor>& params, const std::vector<Batch>& micro_batches,
                    double lr, const StepOptions& options) {
  StepResult result;
  result.lr = lr;
  set_learning_rate(optimizer, lr);
  optimizer.zero_grad();
  const double tokens = tokens_in_step(micro_batches, options.data_parallel);
  at::Tensor loss_sum =
      at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(options.device));
  if (options.batch_invariant) {
    loss_sum = backward_sequences_pairwise(model, params, micro_batches, tokens, options);
  } else {
    for (const auto& batch : micro_batches) {
      at::Tensor loss = in_phase("forward", options,
                                 [&] { return micro_batch_loss(model, batch, tokens, options); });
      in_phase("backward", options, [&] { loss.backward(); });
      loss_sum += loss.detach().to(at::kDouble);
    }
  }
  if (options.reduce_gradients) {
    in_phase("gradient all-reduce", options, [&] { options.reduce_gradients(loss_sum); });
  }
  if (options.before_clip) options.before_clip();
  result.grad_norm = in_phase("gradient clipping", options, [&] {
    return clip_grad_norm(params, options.max_norm, options.grad_norm_accumulate);
  });
  result.loss = loss_sum.item<double>();
  in_phase("optimizer step", options, [&] { optimizer.step(); });
  return result;
}

}  // namespace titan
