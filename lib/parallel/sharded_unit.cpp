// Contract in sharded_unit.h.
#include "parallel/sharded_unit.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "model/param_storage.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

// Runs `arrived` after a parameter's AccumulateGrad: its gradient is in.
class GradientArrived : public torch::autograd::FunctionPostHook {
 public:
  explicit GradientArrived(std::function<void()> arrived) : arrived_(std::move(arrived)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    arrived_();
    return outputs;
  }

 private:
  std::function<void()> arrived_;
};

}  // namespace

ShardedUnit::ShardedUnit(ProcessGroup& group, std::vector<at::Tensor> params, std::string name)
    : group_(group),
      params_(std::move(params)),
      name_(std::move(name)),
      layout_(params_, group.size()) {
  const auto released = std::count_if(params_.begin(), params_.end(), storage_released);
  if (released != 0 && static_cast<size_t>(released) != params_.size())
    throw std::invalid_argument(name_ + ": some parameters hold memory and some do not");
  {
    at::NoGradGuard no_grad;
    if (released != 0) {  // shape only: the values come through load_rows
      shard_ = at::zeros({layout_.segment_numel()}, params_.front().options());
      gathered_ = false;
    } else {
      std::vector<at::Tensor> values;
      for (const auto& p : params_) values.push_back(p.detach());
      shard_ = layout_.segment_of(values, group_.rank());
    }
    shard_.requires_grad_();
  }
  for (const auto& p : params_) {
    auto accumulator = torch::autograd::impl::grad_accumulator(p);
    accumulator->add_post_hook(std::make_unique<GradientArrived>([this] { gradient_arrived(); }));
    accumulators_.push_back(std::move(accumulator));
  }
  release();
}

void ShardedUnit::load_rows(size_t i, int64_t first_row, const at::Tensor& values) {
  if (gathered_) throw std::logic_error(name_ + ": load_rows while gathered");
  const ParamShard& p = layout_.params().at(i);
  const RowRange mine = fsdp_rows(p.rows, group_.rank(), group_.size());
  const int64_t begin = std::max(mine.begin, first_row);
  const int64_t end = std::min(mine.end, first_row + values.size(0));
  if (begin >= end) return;
  at::NoGradGuard no_grad;
  layout_.shard_view(shard_.detach(), i)
      .narrow(0, begin - mine.begin, end - begin)
      .copy_(values.narrow(0, begin - first_row, end - begin));
}

void ShardedUnit::prefetch() {
  if (gathered_ || pending_gather_) return;
  at::NoGradGuard no_grad;
  gather_buffer_ =
      at::empty({group_.size() * layout_.segment_numel()}, shard_.options().dtype(param_dtype_));
  gather_input_ = shard_.detach().to(param_dtype_);
  pending_gather_ = group_.start_all_gather(gather_buffer_, gather_input_,
                                            fmt::format("{}'s parameter all-gather", name_));
}

void ShardedUnit::gather() {
  if (gathered_) return;
  prefetch();
  {
    ScopedSeconds timed(seconds_.gather_wait);
    pending_gather_->wait();
  }
  pending_gather_.reset();
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> full = layout_.unpack_gathered(gather_buffer_);
  gather_buffer_ = at::Tensor();
  gather_input_ = at::Tensor();
  for (size_t i = 0; i < params_.size(); ++i)
    refill_storage_moving(params_[i], full[i].to(shard_.scalar_type()));
  gathered_ = true;
}

void ShardedUnit::release() {
  if (!gathered_) return;
  for (const auto& p : params_) release_storage(p);
  gathered_ = false;
}

at::Tensor ShardedUnit::after_forward(const at::Tensor& output, bool reshard) {
  if (reshard) release();
  if (output.requires_grad()) {
    output.register_hook([this](const at::Tensor& grad) {
      gather();
      if (backward_prefetch_) backward_prefetch_->prefetch();
      return grad;
    });
  }
  return output;
}

void ShardedUnit::gradient_arrived() {
  if (++gradients_in_ < params_.size()) return;
  gradients_in_ = 0;
  if (reduce_in_backward_) {
    reduce_gradients();
  } else {
    release();
  }
}

void ShardedUnit::reduce_gradients() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params_) {
    grads.push_back(p.grad().defined() ? p.grad() : at::zeros(p.sizes(), shard_.options()));
  }
  at::Tensor reduced = at::zeros({layout_.segment_numel()}, shard_.options().dtype(reduce_dtype_));
  ScopedSeconds timed(seconds_.reduce_scatter);
  group_
      .start_reduce_scatter_sum(
          reduced, layout_.pack_for_reduce_scatter(grads).to(reduce_dtype_),
          fmt::format("{}'s gradient reduce-scatter of backward {}", name_, ++backward_passes_))
      ->wait();
  reduced = reduced.to(shard_.scalar_type());
  if (shard_.grad().defined()) {
    shard_.mutable_grad().add_(reduced);
  } else {
    shard_.mutable_grad() = reduced;
  }
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
  release();
}

}  // namespace titan
