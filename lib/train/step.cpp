#include "train/step.h"

#include "optim/optimizer.h"
#include "util/autocast.h"

namespace titan {

at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  return at::cross_entropy_loss(logits.flatten(0, 1).to(at::kFloat), labels.flatten(0, 1), {},
                                at::Reduction::Sum);
}

StepResult run_step(Transformer& model, torch::optim::Optimizer& optimizer,
                    const std::vector<at::Tensor>& params, const std::vector<Batch>& micro_batches,
                    double lr, const StepOptions& options) {
  StepResult result;
  result.lr = lr;
  set_learning_rate(optimizer, lr);
  optimizer.zero_grad();
  double tokens_in_step = 0;
  for (const auto& batch : micro_batches)
    tokens_in_step += static_cast<double>(batch.labels.numel());
  tokens_in_step *= static_cast<double>(options.data_parallel);
  at::Tensor loss_sum =
      at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(options.device));
  for (const auto& batch : micro_batches) {
    auto inputs = batch.inputs.to(options.device), labels = batch.labels.to(options.device);
    at::Tensor loss;
    {
      CudaAutocastScope autocast(options.autocast_bf16, at::kBFloat16);
      loss = summed_cross_entropy(model->forward(inputs), labels) / tokens_in_step;
    }
    loss.backward();
    loss_sum += loss.detach().to(at::kDouble);
  }
  if (options.reduce_gradients) options.reduce_gradients(loss_sum);
  if (options.before_clip) options.before_clip();
  result.grad_norm = clip_grad_norm(params, options.max_norm);
  result.loss = loss_sum.item<double>();
  optimizer.step();
  return result;
}

}  // namespace titan
