// Contract in replication.h.
#include "parallel/replication.h"

#include <fmt/format.h>

#include <stdexcept>

#include "optim/optimizer.h"
#include "util/hash.h"

namespace titan {

Replication::Replication(Model model, std::vector<at::Tensor> params,
                         torch::optim::AdamW* optimizer, ProcessGroup* group, bool rank_ordered,
                         std::string replicated_because)
    : model_(std::move(model)),
      params_(std::move(params)),
      optimizer_(optimizer),
      group_(group),
      replicated_because_(std::move(replicated_because)) {
  if (group_ && group_->size() > 1) {
    reducer_ =
        std::make_unique<GradientReducer>(*group_, params_, kGradientBucketBytes, rank_ordered);
  }
}

int64_t Replication::ranks() const { return group_ ? group_->size() : 1; }

void Replication::sum_over_ranks(at::Tensor& tensor, const std::string& what) {
  if (ranks() > 1) group_->all_reduce_sum(tensor, what);
}

torch::optim::AdamW& Replication::optimizer() {
  if (!optimizer_) throw std::logic_error("replication: this execution has no optimizer");
  return *optimizer_;
}

CheckpointLayout Replication::checkpoint_layout() {
  CheckpointLayout layout;
  layout.load = [this](const std::string& name, int64_t first_row, const at::Tensor& rows) {
    load_rows(name, first_row, rows);
  };
  return layout;
}

void Replication::load_rows(const std::string& name, int64_t first_row, const at::Tensor& values) {
  const at::Tensor* param = model_->named_parameters().find(name);
  if (!param) throw std::invalid_argument("load_rows: the model has no parameter " + name);
  check_rows_fit(name, param->sizes(), first_row, values);
  at::NoGradGuard no_grad;
  param->detach().narrow(0, first_row, values.size(0)).copy_(values);
}

void Replication::resume_optimizer_rows(
    const std::vector<std::optional<AdamWParamSnapshot>>& rows) {
  // Replication's resume restores the whole optimizer's state with the weights.
  if (!rows.empty()) throw std::logic_error("replication: a resume has no rows to hand over");
}

void Replication::reduce_gradients(at::Tensor& loss_sum, int64_t step) {
  if (reducer_) reducer_->reduce(loss_sum, step);
}

double Replication::clip_gradients(double max_norm, GradNormAccumulate accumulate) {
  return clip_grad_norm(params_, max_norm, accumulate);
}

uint64_t Replication::params_checksum() { return tensors_checksum(params_); }

uint64_t Replication::gradients_checksum() {
  std::vector<at::Tensor> grads;
  for (const auto& p : params_) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  return tensors_checksum(grads);
}

Snapshot Replication::snapshot(const TrainState& state) {
  return take_snapshot(*model_, optimizer(), state);
}

void Replication::restore(const Snapshot& snapshot) {
  restore_snapshot(snapshot, *model_, optimizer());
}

std::vector<LocalPiece> Replication::local_pieces() const {
  std::vector<LocalPiece> out;
  for (const auto& item : model_->named_parameters())
    out.push_back(LocalPiece{item.key(), item.value(), item.value().grad()});
  return out;
}

std::string Replication::describe() const {
  std::string mode = fmt::format("replication, gradients all-reduced in {} bucket(s)",
                                 reducer_ ? reducer_->buckets() : 0);
  if (!replicated_because_.empty())
    mode += fmt::format(" (the shard degree replicates: {})", replicated_because_);
  return mode;
}

std::vector<std::string> Replication::cost_lines(int64_t steps, double seconds) const {
  if (!reducer_) return {};
  return reducer_->cost_lines(steps, seconds);
}

}  // namespace titan
