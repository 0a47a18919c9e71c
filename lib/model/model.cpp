#include "model/model.h"

#include <ATen/record_function.h>

#include <cmath>

namespace titan {

ModelImpl::ModelImpl(const ModelArgs& args) : args_(args) {
  runners_.resize(args.n_layers);
  for (int64_t i = 0; i < args.n_layers; ++i) block_names_.push_back("layers." + std::to_string(i));
}

at::Tensor ModelImpl::forward(const at::Tensor& tokens) {
  TORCH_CHECK(tokens.size(1) <= args_.max_seq_len, "sequence length ", tokens.size(1),
              " exceeds the RoPE table (", args_.max_seq_len, ")");
  auto starting = [this](ParamUnit unit, int64_t layer) {
    if (unit_hooks_) unit_hooks_->unit_starting(unit, layer);
  };
  auto finished = [this](ParamUnit unit, int64_t layer, const at::Tensor& out) {
    return unit_hooks_ ? unit_hooks_->unit_finished(unit, layer, out) : out;
  };
  starting(ParamUnit::kEmbedding, -1);
  auto h = finished(ParamUnit::kEmbedding, -1, embed(tokens));  // (B, T, D)
  if (observer_) observer_->stage_output(ForwardStage::kEmbedding, -1, h);
  for (int64_t layer = 0; layer < n_blocks(); ++layer) {
    BlockFunction run = [block = block_function(layer),
                         name = block_names_[layer]](const at::Tensor& x) {
      // A span named after the block for profilers (a user scope: the op tracers, which record
      // FUNCTION scopes, do not see it), around its forward and its recomputation.
      RECORD_USER_SCOPE(name.c_str());
      return block(x);
    };
    // The unit hooks (FSDP's gathers and releases) stay outside the observer's window on the
    // block, so that an op trace of the block holds the block's own ops only.
    starting(ParamUnit::kBlock, layer);
    if (observer_) observer_->block_starting(layer);
    at::Tensor out = runners_[layer] ? runners_[layer](run, h) : run(h);  // (B, T, D)
    if (observer_) observer_->stage_output(ForwardStage::kBlock, layer, out);
    h = finished(ParamUnit::kBlock, layer, out);
  }
  starting(ParamUnit::kHead, -1);
  h = final_norm(h);
  if (observer_) observer_->stage_output(ForwardStage::kNorm, -1, h);
  auto logits = finished(ParamUnit::kHead, -1, project(h));  // (B, T, V)
  if (observer_) observer_->stage_output(ForwardStage::kOutput, -1, logits);
  return logits;
}

void ModelImpl::set_block_runner(int64_t layer, BlockRunner runner) {
  runners_.at(layer) = std::move(runner);
}

void trunc_normal_(at::Tensor& tensor, double mean, double std, double a, double b) {
  // Inverse-CDF sampling, the same method as torch.nn.init.trunc_normal_.
  auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = norm_cdf((a - mean) / std), hi = norm_cdf((b - mean) / std);
  torch::NoGradGuard no_grad;
  tensor.uniform_(2 * lo - 1, 2 * hi - 1);
  tensor.erfinv_();
  tensor.mul_(std * std::sqrt(2.0));
  tensor.add_(mean);
  tensor.clamp_(a, b);
}

}  // namespace titan
