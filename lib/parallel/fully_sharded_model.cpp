// Contract in fully_sharded_model.h.
#include "parallel/fully_sharded_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "checkpoint/model_checkpoint.h"
#include "checkpoint/snapshot.h"
#include "optim/optimizer.h"
#include "parallel/sharded_sums.h"
#include "parallel/split_checksum.h"
#include "util/hash.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

using torch::optim::AdamWParamState;

}  // namespace

ReshardAfterForward reshard_after_forward_of(const std::string& key_value) {
  if (key_value == "always") return ReshardAfterForward::kAlways;
  if (key_value == "never") return ReshardAfterForward::kNever;
  if (key_value == "default") return ReshardAfterForward::kDefault;
  throw std::invalid_argument("fsdp_reshard_after_forward: " + key_value);
}

// Gathers a unit before its forward and hands its output to it after.
class FullyShardedModel::Hooks : public UnitHooks {
 public:
  explicit Hooks(FullyShardedModel& owner) : owner_(owner) {}
  void unit_starting(ParamUnit unit, int64_t layer) override {
    owner_.unit_of(unit, layer).gather();
    if (unit == ParamUnit::kHead && owner_.tied()) owner_.units_.front()->gather();
    if (!owner_.prefetch_) return;
    const size_t index = unit == ParamUnit::kEmbedding ? 0
                         : unit == ParamUnit::kBlock   ? static_cast<size_t>(layer) + 1
                                                       : owner_.units_.size() - 1;
    if (index + 1 < owner_.units_.size()) owner_.units_[index + 1]->prefetch();
  }
  at::Tensor unit_finished(ParamUnit unit, int64_t layer, const at::Tensor& output) override {
    at::Tensor out = owner_.unit_of(unit, layer).after_forward(output, owner_.reshards(unit));
    // The tied output weight: released as the embedding's policy says, and gathered again for
    // the head's backward. Its gradient, the sum of both uses, is reduced once, after the
    // embedding's backward (the parameter's AccumulateGrad waits for both).
    if (unit == ParamUnit::kHead && owner_.tied()) {
      out = owner_.units_.front()->after_forward(out, owner_.reshards(ParamUnit::kEmbedding));
    }
    return out;
  }

 private:
  FullyShardedModel& owner_;
};

FullyShardedModel::FullyShardedModel(Model model, ProcessGroup& group, ReshardAfterForward reshard,
                                     bool prefetch, ProcessGroup* replicas)
    : model_(std::move(model)),
      group_(group),
      replicas_(replicas),
      reshard_(reshard),
      prefetch_(prefetch) {
  units_.push_back(std::make_unique<ShardedUnit>(
      group_, model_->unit_parameters(ParamUnit::kEmbedding, -1), "tok_embeddings"));
  for (int64_t i = 0; i < model_->n_blocks(); ++i) {
    units_.push_back(std::make_unique<ShardedUnit>(
        group_, model_->unit_parameters(ParamUnit::kBlock, i), fmt::format("layers.{}", i)));
  }
  units_.push_back(std::make_unique<ShardedUnit>(
      group_, model_->unit_parameters(ParamUnit::kHead, -1), "norm and output"));
  // The units' parameters, in order, must be the model's: the optimizer's shards, checkpoints
  // and checksums all count on one order.
  const auto named = model_->named_parameters();
  size_t k = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& params = units_[u]->params();
    for (size_t i = 0; i < params.size(); ++i) {
      if (k >= named.size() || !named[k].value().is_same(params[i]))
        throw std::logic_error("FSDP units do not cover the model's parameters in order");
      names_.push_back(named[k].key());
      places_[named[k].key()] = {u, i};
      ++k;
    }
  }
  if (k != named.size()) throw std::logic_error("FSDP units leave model parameters out");
  if (prefetch_) {
    for (size_t i = 1; i < units_.size(); ++i)
      units_[i]->set_backward_prefetch(units_[i - 1].get());
  }
  model_->set_unit_hooks(std::make_shared<Hooks>(*this));
}

ShardedUnit::CollectiveSeconds FullyShardedModel::collective_seconds() const {
  ShardedUnit::CollectiveSeconds total;
  for (const auto& unit : units_) {
    total.gather_wait += unit->collective_seconds().gather_wait;
    total.reduce_scatter += unit->collective_seconds().reduce_scatter;
  }
  return total;
}

FullyShardedModel::~FullyShardedModel() { model_->set_unit_hooks(nullptr); }

ShardedUnit& FullyShardedModel::unit_of(ParamUnit unit, int64_t layer) {
  switch (unit) {
    case ParamUnit::kEmbedding:
      return *units_.front();
    case ParamUnit::kBlock:
      return *units_.at(static_cast<size_t>(layer) + 1);
    case ParamUnit::kHead:
      break;
  }
  return *units_.back();
}

bool FullyShardedModel::reshards(ParamUnit unit) const {
  switch (reshard_) {
    case ReshardAfterForward::kAlways:
      return true;
    case ReshardAfterForward::kNever:
      return false;
    case ReshardAfterForward::kDefault:
      break;
  }
  // torchtitan: the norm and output are needed first by the backward, so they stay.
  return unit != ParamUnit::kHead;
}

void FullyShardedModel::load_rows(const std::string& name, int64_t first_row,
                                  const at::Tensor& values) {
  const auto place = places_.find(name);
  if (place == places_.end())
    throw std::invalid_argument("load_rows: the model has no parameter " + name);
  ShardedUnit& unit = *units_[place->second.first];
  const size_t i = place->second.second;
  check_rows_fit(name, unit.params()[i].sizes(), first_row, values);
  unit.load_rows(i, first_row, values);
}

std::vector<at::Tensor> FullyShardedModel::shards() const {
  std::vector<at::Tensor> out;
  for (const auto& unit : units_) out.push_back(unit->shard());
  return out;
}

void FullyShardedModel::set_reduce_in_backward(bool reduce) {
  for (auto& unit : units_) unit->set_reduce_in_backward(reduce);
}

void FullyShardedModel::sum_gradients_in_rank_order(ProcessGroup& world, const std::string& what) {
  at::NoGradGuard no_grad;
  // Under HSDP every shard group holds the same segments: the world's contribution for rank q
  // is the segment of q's position in its shard group (rank = replica * shard + position).
  const int64_t replicas = world.size() / group_.size();
  for (auto& unit : units_) {
    std::vector<at::Tensor> grads;
    for (const auto& p : unit->params()) {
      grads.push_back(p.grad().defined() ? p.grad()
                                         : at::zeros(p.sizes(), unit->shard().options()));
    }
    at::Tensor packed = unit->layout().pack_for_reduce_scatter(grads);  // (shard * S,)
    grads.clear();
    drop_gradients(unit->params());  // the full gradients go as soon as they are packed
    if (replicas > 1) packed = packed.repeat({replicas});  // (world * S,)
    at::Tensor shard = at::empty_like(unit->shard());
    reduce_scatter_in_rank_order(world, shard, packed, what);
    const_cast<at::Tensor&>(unit->shard()).mutable_grad() = shard;
  }
}

void FullyShardedModel::set_reduce_dtype(at::ScalarType dtype) {
  reduce_dtype_ = dtype;
  for (auto& unit : units_) unit->set_reduce_dtype(dtype);
}

void FullyShardedModel::set_param_dtype(at::ScalarType dtype) {
  param_dtype_ = dtype;
  for (auto& unit : units_) unit->set_param_dtype(dtype);
}

void FullyShardedModel::with_exact_gathers(const std::function<void()>& body) {
  for (auto& unit : units_) unit->set_param_dtype(unit->shard().scalar_type());
  try {
    body();
  } catch (...) {
    set_param_dtype(param_dtype_);
    throw;
  }
  set_param_dtype(param_dtype_);
}

void FullyShardedModel::sum_over_replicas(int64_t step) {
  if (!replicas_ || replicas_->size() == 1) return;
  ScopedSeconds timed(replica_sum_seconds_);
  std::vector<std::unique_ptr<PendingCollective>> pending;
  std::vector<std::pair<at::Tensor, at::Tensor>> cast_back;  // (reduced, the gradient)
  for (auto& unit : units_) {
    const at::Tensor& grad = unit->shard().grad();
    if (!grad.defined()) continue;  // no rank's backward reached it: none has a gradient
    at::Tensor reduced = grad;
    if (reduce_dtype_ != grad.scalar_type()) {
      reduced = grad.to(reduce_dtype_);
      // Gloo (libtorch 1.13) has no bfloat16 sum: the rounded values are summed in float32.
      if (grad.is_cpu()) reduced = reduced.to(grad.scalar_type());
      cast_back.emplace_back(reduced, grad);
    }
    pending.push_back(replicas_->start_all_reduce_sum(
        reduced,
        fmt::format("{}'s gradient sum over the replicas of step {}", unit->name(), step)));
  }
  for (auto& p : pending) p->wait();
  at::NoGradGuard no_grad;
  // The sums rounded to the reduce dtype, as a sum in it would be.
  for (auto& [reduced, grad] : cast_back) grad.copy_(reduced.to(reduce_dtype_));
}

uint64_t FullyShardedModel::params_checksum() {
  if (!units_.front()->shard().device().is_cpu()) return gathered_params_checksum();
  std::vector<BytesRange> ranges;
  for (const auto& unit : units_) {
    const at::Tensor shard = unit->shard().detach();
    for (size_t i = 0; i < unit->params().size(); ++i) {
      const ParamShard& p = unit->layout().params()[i];
      const int64_t row_bytes = p.row_numel * static_cast<int64_t>(shard.element_size());
      const at::Tensor real =
          unit->layout().shard_view(shard, i).narrow(0, 0, p.real_rows(group_.rank()));
      BytesRange range;
      range.total = p.rows * row_bytes;
      range.begin = std::min(group_.rank() * p.shard_rows * row_bytes, range.total);
      range.bytes = real.reshape({-1}).view(at::kByte);
      range.largest = p.shard_rows * row_bytes;
      ranges.push_back(std::move(range));
    }
  }
  return split_tensors_checksum(group_, ranges);
}

uint64_t FullyShardedModel::gathered_params_checksum() {
  uint64_t h = names_.size();          // tensors_checksum's seed: the number of tensors
  std::vector<ShardedUnit*> regather;  // gathered for compute before: gathered so again after
  with_exact_gathers([&] {
    for (size_t u = 0; u < units_.size(); ++u) {
      auto& unit = units_[u];
      if (unit->gathered()) regather.push_back(unit.get());
      unit->release();
      unit->gather();
      // The next unit moves while this one is hashed.
      if (prefetch_ && u + 1 < units_.size()) units_[u + 1]->prefetch();
      for (const auto& p : unit->params()) h = hash_combine(h, tensor_checksum(p.detach()));
      unit->release();
    }
  });
  for (ShardedUnit* unit : regather) unit->gather();
  return h;
}

std::vector<at::Tensor> FullyShardedModel::gathered_segments(const ShardedUnit& unit,
                                                             const at::Tensor& mine,
                                                             const std::string& what) {
  at::Tensor all = at::empty({group_.size() * unit.layout().segment_numel()}, mine.options());
  group_.start_all_gather(all, mine, fmt::format("{}'s {} all-gather", unit.name(), what))->wait();
  return unit.layout().unpack_gathered(all);
}

std::vector<at::Tensor> FullyShardedModel::gathered_gradients(ShardedUnit& unit) {
  at::NoGradGuard no_grad;
  const at::Tensor& grad = unit.shard().grad();
  return gathered_segments(unit,
                           grad.defined()
                               ? grad.detach().contiguous()
                               : at::zeros({unit.layout().segment_numel()}, unit.shard().options()),
                           "gradient");
}

uint64_t FullyShardedModel::gradients_checksum() {
  uint64_t h = names_.size();  // tensors_checksum's seed: the number of tensors
  for (auto& unit : units_) {
    for (const auto& g : gathered_gradients(*unit)) h = hash_combine(h, tensor_checksum(g));
  }
  return h;
}

void FullyShardedModel::visit_full_gradients_backward(const GradientVisitor& visit) {
  size_t k = names_.size();
  for (auto unit = units_.rbegin(); unit != units_.rend(); ++unit) {
    const std::vector<at::Tensor> grads = gathered_gradients(**unit);
    k -= grads.size();
    for (size_t i = grads.size(); i-- > 0;) visit(names_[k + i], grads[i]);
  }
}

std::vector<at::Tensor> FullyShardedModel::snapshot_tensors() const {
  std::vector<at::Tensor> out = shards();
  for (const auto& b : model_->buffers()) out.push_back(b);
  return out;
}

CheckpointShard FullyShardedModel::checkpoint_shard(torch::optim::AdamW& sharded) const {
  TORCH_CHECK(sharded.param_groups().size() == 1, "FSDP's optimizer has one parameter group");
  CheckpointShard out;
  out.position = group_.rank();
  out.shards = group_.size();
  const Snapshot s = take_snapshot(shards(), sharded, TrainState(), SnapshotCopy::kShare);
  std::vector<NamedStep> steps;
  size_t k = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitLayout& layout = units_[u]->layout();
    const auto& state = s.optimizer[u];
    for (size_t i = 0; i < layout.params().size(); ++i, ++k) {
      const ParamShard& p = layout.params()[i];
      const RowRange range = fsdp_rows(p.rows, out.position, out.shards);
      const int64_t begin = range.begin, rows = range.end - range.begin;
      auto piece = [&](const std::string& name, const at::Tensor& segment) {
        return RowsPiece{name, layout.shard_view(segment.detach(), i).narrow(0, 0, rows), begin,
                         p.rows};
      };
      out.model.push_back(piece(names_[k], units_[u]->shard()));
      if (!state) continue;  // before the first step: every rank alike
      steps.push_back({names_[k], state->step});
      out.optimizer.push_back(piece(names_[k] + ".exp_avg", state->exp_avg));
      out.optimizer.push_back(piece(names_[k] + ".exp_avg_sq", state->exp_avg_sq));
      if (state->max_exp_avg_sq.defined())
        out.optimizer.push_back(piece(names_[k] + ".max_exp_avg_sq", state->max_exp_avg_sq));
    }
  }
  out.optimizer_metadata = adamw_metadata(s.groups, {names_.size()}, steps);
  return out;
}

void FullyShardedModel::gather_parameters() {
  at::NoGradGuard no_grad;
  with_exact_gathers([this] {
    for (auto& unit : units_) unit->gather();
  });
}

void FullyShardedModel::release_whole(torch::optim::AdamW& whole) {
  for (auto& unit : units_) unit->release();
  whole.state().clear();
}

void FullyShardedModel::take_optimizer_rows(
    const std::vector<std::optional<AdamWParamSnapshot>>& rows, torch::optim::AdamW& sharded) {
  if (rows.empty()) return;
  TORCH_CHECK(rows.size() == names_.size(), "one AdamW state per parameter");
  at::NoGradGuard no_grad;
  size_t k = 0;
  for (auto& unit : units_) {
    const UnitLayout& layout = unit->layout();
    const size_t n = layout.params().size();
    const bool all = std::all_of(rows.begin() + k, rows.begin() + k + n,
                                 [](const auto& r) { return r.has_value(); });
    if (all) {  // else saved before the first step
      auto state = std::make_unique<AdamWParamState>();
      at::Tensor m = at::zeros({layout.segment_numel()}, unit->shard().options());
      at::Tensor v = at::zeros({layout.segment_numel()}, unit->shard().options());
      for (size_t i = 0; i < n; ++i) {
        const int64_t real = layout.params()[i].real_rows(group_.rank());
        layout.shard_view(m, i).narrow(0, 0, real).copy_(rows[k + i]->exp_avg);
        layout.shard_view(v, i).narrow(0, 0, real).copy_(rows[k + i]->exp_avg_sq);
        state->step(rows[k + i]->step);
      }
      state->exp_avg(m);
      state->exp_avg_sq(v);
      sharded.state()[adamw_state_key(unit->shard())] = std::move(state);
    }
    k += n;
  }
}

std::vector<LocalPiece> FullyShardedModel::local_pieces() const {
  std::vector<LocalPiece> out;
  size_t k = 0;
  for (const auto& unit : units_) {
    const at::Tensor shard = unit->shard().detach();
    const at::Tensor grad = unit->shard().grad();
    const auto& layout = unit->layout();
    for (size_t i = 0; i < layout.params().size(); ++i) {
      const int64_t rows = layout.params()[i].real_rows(group_.rank());
      LocalPiece piece;
      piece.name = names_[k++];
      piece.value = layout.shard_view(shard, i).narrow(0, 0, rows);
      if (grad.defined()) piece.grad = layout.shard_view(grad, i).narrow(0, 0, rows);
      out.push_back(std::move(piece));
    }
  }
  return out;
}

int64_t FullyShardedModel::largest_unit_bytes() const {
  int64_t largest = 0;
  for (const auto& unit : units_) {
    int64_t bytes = 0;
    for (const auto& p : unit->params())
      bytes += p.numel() * static_cast<int64_t>(p.element_size());
    largest = std::max(largest, bytes);
  }
  return largest;
}

}  // namespace titan
