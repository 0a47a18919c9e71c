#include "instruments/layer_norms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/stopwatch.h"

namespace titan {

namespace {
// The sum of t's squares, accumulated in float64 a slice of 2^22 values at a time (a slice's copy
// in float64 stays small beside a large embedding). In float32 a sum's last bits depend on how the
// tensor is split: FSDP's row pieces and replication's whole tensors would print different
// norms; float64's rounding lies far below the digits any report shows.
at::Tensor sum_of_squares(const at::Tensor& t) {
  constexpr int64_t kSlice = int64_t{1} << 22;
  at::Tensor flat = t.detach().reshape({-1});
  at::Tensor sum = at::zeros({}, t.options().dtype(at::kDouble));
  for (int64_t start = 0; start < flat.numel(); start += kSlice) {
    at::Tensor slice = flat.slice(0, start, std::min(start + kSlice, flat.numel()));
    sum += at::linalg_vector_norm(slice, 2, c10::nullopt, false, at::kDouble).square();
  }
  return sum;
}
}  // namespace

// The L2 norm of each group, combined in float64 on the host. All sums come to the host in one
// copy: one synchronization a call instead of one a tensor, which on a GPU cost more than the
// norms. Under FSDP each tensor is a piece, and the squares are summed over the ranks before the
// host copy.
std::vector<double> LayerNorms::l2_norms(const std::vector<std::vector<at::Tensor>>& groups) const {
  std::vector<at::Tensor> sums;
  for (const auto& group : groups) {
    for (const auto& t : group) {
      if (t.defined()) sums.push_back(sum_of_squares(t));
    }
  }
  at::Tensor squares = sums.empty() ? at::Tensor() : at::stack(sums);
  if (sum_over_ && squares.defined()) sum_over_->all_reduce_sum(squares, "the per-layer norms");
  const at::Tensor host = squares.defined() ? squares.cpu() : at::Tensor();
  const double* square = squares.defined() ? host.data_ptr<double>() : nullptr;
  std::vector<double> result;
  for (const auto& group : groups) {
    double sum_squares = 0;
    for (const auto& t : group) {
      if (!t.defined()) continue;
      sum_squares += *square;
      ++square;
    }
    result.push_back(std::sqrt(sum_squares));
  }
  return result;
}

namespace {

// The histogram of `values` under `tag`, and when some were inf or NaN (a diverged step), their
// count under tag + "_non_finite": TensorBoard's buckets hold finite values only.
void add_histogram(std::vector<SummaryValue>& out, const std::string& tag,
                   const std::vector<at::Tensor>& values) {
  SummaryValue v;
  v.tag = tag;
  v.is_histogram = true;
  v.histogram = make_histogram(values);
  const double non_finite = v.histogram.non_finite;
  out.push_back(std::move(v));
  if (non_finite > 0) {
    SummaryValue count;
    count.tag = tag + "_non_finite";
    count.scalar = static_cast<float>(non_finite);
    out.push_back(std::move(count));
  }
}

}  // namespace

std::string part_of(const std::string& name) {
  const std::string blocks = "layers.";
  if (name.rfind(blocks, 0) == 0) {
    const size_t end = name.find('.', blocks.size());
    return name.substr(blocks.size(), end == std::string::npos ? end : end - blocks.size());
  }
  return name.substr(0, name.find('.'));
}

std::string moe_part_of(const std::string& name) {
  const std::string block = part_of(name);
  for (const char* sub : {".moe.experts.", ".moe.router.", ".moe.shared_experts."}) {
    const std::string prefix = "layers." + block + sub;
    if (name.rfind(prefix, 0) == 0) return block + std::string(sub).substr(0, strlen(sub) - 1);
  }
  return "";
}

Histogram make_histogram(const std::vector<at::Tensor>& values, int64_t buckets) {
  std::vector<at::Tensor> flat;
  for (const auto& t : values) flat.push_back(t.detach().reshape(-1).to(at::kDouble).cpu());
  const at::Tensor every = flat.empty() ? at::zeros({0}, at::kDouble) : at::cat(flat);
  const at::Tensor all = every.masked_select(at::isfinite(every));
  Histogram h;
  h.num = static_cast<double>(all.numel());
  h.non_finite = static_cast<double>(every.numel() - all.numel());
  if (all.numel() == 0) return h;
  h.min = all.min().item<double>();
  h.max = all.max().item<double>();
  h.sum = all.sum().item<double>();
  h.sum_squares = all.pow(2).sum().item<double>();
  if (h.min == h.max) {
    h.bucket_limit = {h.max};
    h.bucket = {h.num};
    return h;
  }
  // Bucket i holds (limit[i-1], limit[i]]. The index from the bucket width, then moved by one
  // where rounding put a value on the wrong side of a limit.
  const double width = (h.max - h.min) / static_cast<double>(buckets);
  for (int64_t i = 1; i <= buckets; ++i)
    h.bucket_limit.push_back(i == buckets ? h.max : h.min + width * static_cast<double>(i));
  const at::Tensor limits = at::tensor(h.bucket_limit, at::kDouble);
  at::Tensor index = ((all - h.min) / width).ceil_().sub_(1).clamp_(0, buckets - 1).to(at::kLong);
  index += all.gt(limits.index_select(0, index)).to(at::kLong);
  const at::Tensor lower = limits.index_select(0, (index - 1).clamp_(0, buckets - 1));
  index -= (all.le(lower) & index.gt(0)).to(at::kLong);
  const at::Tensor counts = at::bincount(index, {}, buckets).to(at::kDouble);
  const double* c = counts.data_ptr<double>();
  h.bucket.assign(c, c + buckets);
  return h;
}

bool LayerNormSchedule::measures(int64_t step) const {
  return every_step || histograms(step) || step == 1 || step % log_freq == 0 || step == steps;
}

bool LayerNormSchedule::histograms(int64_t step) const {
  return histogram_freq > 0 && step % histogram_freq == 0;
}

LayerNorms::LayerNorms(const DataParallel& parallel, const LayerNormSchedule& schedule)
    : schedule_(schedule), sum_over_(parallel.pieces_split_over()) {
  // The pieces are the parameters, or views of the shards, which the optimizer updates in place.
  for (const auto& piece : parallel.local_pieces()) add_parameter(piece.name, piece.value);
  gradients_ = [&parallel] {
    std::vector<at::Tensor> grads;
    for (const auto& piece : parallel.local_pieces()) grads.push_back(piece.grad);
    return grads;
  };
}

void LayerNorms::add_parameter(const std::string& name, const at::Tensor& value) {
  // A part's parameters are consecutive in the model's order; an MoE sub-part's lie inside its
  // block's, which still holds them too.
  const size_t index = params_.size();
  params_.push_back(value);
  for (const std::string& part : {part_of(name), moe_part_of(name)}) {
    if (part.empty()) continue;
    auto it =
        std::find_if(parts_.rbegin(), parts_.rend(), [&](const Part& p) { return p.name == part; });
    if (it == parts_.rend()) {
      parts_.push_back(Part{part, {}, {}, index, 0});
      it = parts_.rbegin();
    }
    it->params.push_back(value);
  }
}

UpdateMeasurer* LayerNorms::measurer_of(torch::optim::AdamW& optimizer) const {
  UpdateMeasurer* measurer = update_measurer(optimizer);
  if (!measurer) return nullptr;
  for (const Part& part : parts_)
    for (const auto& p : part.params)
      if (!measurer->covers(p)) return nullptr;
  return measurer;
}

void LayerNorms::before_step(StepContext& context) {
  ScopedSeconds timed(cost_.seconds);
  measuring_ = true;
  with_histograms_ = schedule_.histograms(context.step);
  histograms_.clear();
  measurer_ = measurer_of(context.engine.optimizer());
  if (measurer_) {
    measurer_->measure_next_step(params_);
    return;
  }
  at::NoGradGuard no_grad;
  for (Part& part : parts_) {
    part.before.clear();
    for (const auto& p : part.params) part.before.push_back(p.detach().clone());
  }
}

void LayerNorms::gradients_ready(const StepRequest&) {
  if (!measuring_) return;
  ScopedSeconds timed(cost_.seconds);
  const std::vector<at::Tensor> all = gradients_();
  std::vector<std::vector<at::Tensor>> grads;
  for (const Part& part : parts_) {
    std::vector<at::Tensor> g;
    for (size_t i = 0; i < part.params.size(); ++i) {
      if (all[part.first + i].defined()) g.push_back(all[part.first + i]);
    }
    grads.push_back(std::move(g));
  }
  const std::vector<double> norms = l2_norms(grads);
  for (size_t i = 0; i < parts_.size(); ++i) {
    parts_[i].grad_norm = norms[i];
    if (with_histograms_)
      add_histogram(histograms_, "layers/" + parts_[i].name + "/grads", grads[i]);
  }
}

void LayerNorms::norms_from_copy(std::vector<PartNorms>& out) {
  // Weights then updates, every part's, in one transfer. The update is computed in place of the
  // copy taken before the step (no second copy).
  std::vector<std::vector<at::Tensor>> groups;
  for (Part& part : parts_) {
    for (size_t i = 0; i < part.params.size(); ++i) part.before[i].sub_(part.params[i].detach());
    groups.push_back(part.params);
  }
  for (const Part& part : parts_) groups.push_back(part.before);
  const std::vector<double> norms = l2_norms(groups);
  for (size_t i = 0; i < parts_.size(); ++i) {
    out[i].weight_norm = norms[i];
    out[i].update_norm = norms[parts_.size() + i];
    parts_[i].before.clear();
  }
}

void LayerNorms::norms_from_measurer(std::vector<PartNorms>& out) {
  // Each part's squares of weights then of changes, in one transfer (summed over the ranks under
  // FSDP). A parameter the step left alone (no gradient, or no step ran) changed by 0; its
  // weights' squares are computed here.
  const size_t n = parts_.size();
  at::Tensor squares = at::zeros({2 * static_cast<int64_t>(n)}, at::kDouble);
  double* sum = squares.data_ptr<double>();
  for (size_t i = 0; i < n; ++i) {
    for (const auto& p : parts_[i].params) {
      if (const auto measured = measurer_->measured(p)) {
        sum[i] += measured->weights;
        sum[n + i] += measured->change;
      } else {
        const double norm =
            at::linalg_vector_norm(p.detach(), 2, c10::nullopt, false, at::kDouble).item<double>();
        sum[i] += norm * norm;
      }
    }
  }
  if (sum_over_) sum_over_->all_reduce_sum(squares, "the per-layer norms");
  for (size_t i = 0; i < n; ++i) {
    out[i].weight_norm = std::sqrt(sum[i]);
    out[i].update_norm = std::sqrt(sum[n + i]);
  }
}

void LayerNorms::step_finished(const StepRequest&, StepOutcome& outcome) {
  if (!measuring_) return;
  ScopedSeconds timed(cost_.seconds);
  measuring_ = false;
  ++cost_.count;
  at::NoGradGuard no_grad;
  std::vector<PartNorms> norms(parts_.size());
  if (measurer_) {
    norms_from_measurer(norms);
  } else {
    norms_from_copy(norms);
  }
  LayerNormsFound found;
  for (size_t i = 0; i < parts_.size(); ++i) {
    norms[i].name = parts_[i].name;
    norms[i].grad_norm = parts_[i].grad_norm;
    found.parts.push_back(norms[i]);
    if (with_histograms_)
      add_histogram(histograms_, "layers/" + parts_[i].name + "/weights", parts_[i].params);
  }
  found.histograms = std::move(histograms_);
  histograms_.clear();
  outcome.findings.put(std::move(found));
}

std::string LayerNorms::cost_line(const RunTotals& totals) const {
  if (cost_.count == 0) return "";
  return fmt::format("per-layer norms: {:.2f} ms a measured step ({} steps), {:.2f}% of the run",
                     1e3 * cost_.per_count(), cost_.count, cost_.percent_of(totals.seconds));
}

}  // namespace titan
