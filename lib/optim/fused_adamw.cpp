#include "optim/fused_adamw.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "optim/adamw_kernels.h"
#include "optim/optimizer.h"
#include "util/cpu_features.h"

namespace titan {
namespace {

// Elements per parallel task; the update is elementwise, so the split changes no bit. A measured
// update's blocks: its sums depend on them, so they are fixed.
constexpr int64_t kGrain = 1 << 15;

bool contiguous_float_cpu(const at::Tensor& t) {
  return t.defined() && t.is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

// libtorch's constants for a parameter's `step`-th update.
adamw_kernels::StepConstants step_constants(const torch::optim::AdamWOptions& o, int64_t step) {
  const auto [beta1, beta2] = o.betas();
  const double bias1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1 - std::pow(beta2, static_cast<double>(step));
  return {static_cast<float>(1 - o.lr() * o.weight_decay()),
          static_cast<float>(beta1),
          static_cast<float>(beta2),
          static_cast<float>(1 - beta1),
          static_cast<float>(1 - beta2),
          static_cast<float>(std::sqrt(bias2)),
          static_cast<float>(o.eps()),
          static_cast<float>(-o.lr() / bias1)};
}

}  // namespace

FusedAdamW::FusedAdamW(const std::vector<at::Tensor>& params,
                       const torch::optim::AdamWOptions& options)
    : torch::optim::AdamW(params, options), isa_(fused_kernel_isa()) {
  TORCH_CHECK(fused_adamw_applies(params, options),
              "FusedAdamW: needs float CPU parameters, no amsgrad, and a CPU with AVX2 and FMA");
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  const bool measuring = std::exchange(measure_next_, false);
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[adamw_state_key(p)];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      const at::Tensor& grad = p.grad();
      TORCH_CHECK(contiguous_float_cpu(p) && contiguous_float_cpu(grad) &&
                      contiguous_float_cpu(state.exp_avg()) &&
                      contiguous_float_cpu(state.exp_avg_sq()),
                  "FusedAdamW: a parameter, its gradient or its state is not a contiguous float "
                  "CPU tensor");
      state.step(state.step() + 1);
      const auto constants = step_constants(options, state.step());
      float *pp = p.data_ptr<float>(), *mp = state.exp_avg().data_ptr<float>(),
            *vp = state.exp_avg_sq().data_ptr<float>();
      const float* gp = grad.data_ptr<float>();
      if (measuring) {
        update_measuring(p, mp, vp, constants);
      } else {
        update(pp, gp, mp, vp, 0, p.numel(), constants, nullptr);
      }
    }
  }
  return loss;
}

void FusedAdamW::update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
                        const adamw_kernels::StepConstants& c, UpdateSquares* squares) const {
  const bool wide = isa_ == VectorIsa::kAvx512;
  if (!squares) {
    at::parallel_for(begin, end, kGrain, [&](int64_t first, int64_t last) {
      const auto kernel = wide ? adamw_kernels::avx512::update : adamw_kernels::avx2::update;
      kernel(p + first, g + first, m + first, v + first, last - first, c);
    });
    return;
  }
  // Fixed blocks, whatever the threads: the sums depend on where each block starts.
  const int64_t blocks = (end - begin + kGrain - 1) / kGrain;
  std::vector<adamw_kernels::Squares> sums(static_cast<size_t>(blocks));
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    const auto kernel =
        wide ? adamw_kernels::avx512::update_measured : adamw_kernels::avx2::update_measured;
    for (int64_t b = first; b < last; ++b) {
      const int64_t at = begin + b * kGrain, count = std::min(kGrain, end - at);
      sums[static_cast<size_t>(b)] = kernel(p + at, g + at, m + at, v + at, count, c);
    }
  });
  *squares = UpdateSquares{};
  for (const auto& block : sums) squares->weights += block.weights, squares->change += block.change;
}

namespace {

// The elements [begin, end) of parameter p that `view` holds; nullopt when it is not a
// contiguous float CPU tensor on p's storage, inside p.
std::optional<std::pair<int64_t, int64_t>> range_in(const at::Tensor& view, const at::Tensor& p) {
  if (!contiguous_float_cpu(view) || !contiguous_float_cpu(p) || !view.has_storage() ||
      !p.has_storage() ||
      view.storage().unsafeGetStorageImpl() != p.storage().unsafeGetStorageImpl())
    return std::nullopt;
  const int64_t begin = view.storage_offset() - p.storage_offset();
  const int64_t end = begin + view.numel();
  if (begin < 0 || end > p.numel()) return std::nullopt;
  return std::make_pair(begin, end);
}

}  // namespace

void FusedAdamW::update_measuring(const at::Tensor& p, float* m, float* v,
                                  const adamw_kernels::StepConstants& c) {
  float* pp = p.data_ptr<float>();
  const float* gp = p.grad().data_ptr<float>();
  const auto planned = plan_.find(p.unsafeGetTensorImpl());
  int64_t done = 0;
  if (planned != plan_.end()) {
    for (const MeasuredView& view : planned->second) {  // in order, none overlapping
      if (view.begin == view.end) {
        measured_[view.view] = UpdateSquares{};
        continue;
      }
      if (view.begin > done) update(pp, gp, m, v, done, view.begin, c, nullptr);
      update(pp, gp, m, v, view.begin, view.end, c, &measured_[view.view]);
      done = view.end;
    }
  }
  if (done < p.numel()) update(pp, gp, m, v, done, p.numel(), c, nullptr);
}

bool FusedAdamW::covers(const at::Tensor& view) const {
  for (const auto& group : param_groups_)
    for (const auto& p : group.params())
      if (range_in(view, p)) return true;
  return false;
}

void FusedAdamW::measure_next_step(std::vector<at::Tensor> views) {
  measured_.clear();
  plan_.clear();
  for (const auto& view : views) {
    std::optional<std::pair<int64_t, int64_t>> range;
    const c10::TensorImpl* owner = nullptr;
    for (const auto& group : param_groups_) {
      for (const auto& p : group.params()) {
        if ((range = range_in(view, p))) {
          owner = p.unsafeGetTensorImpl();
          break;
        }
      }
      if (owner) break;
    }
    TORCH_CHECK(owner, "FusedAdamW: a view to measure is not within one of its parameters");
    plan_[owner].push_back({range->first, range->second, view.unsafeGetTensorImpl()});
  }
  for (auto& [param, planned] : plan_) {
    std::sort(planned.begin(), planned.end(),
              [](const MeasuredView& a, const MeasuredView& b) { return a.begin < b.begin; });
    int64_t end = 0;
    for (const MeasuredView& view : planned) {
      if (view.begin == view.end) continue;  // empty: overlaps nothing
      TORCH_CHECK(view.begin >= end, "FusedAdamW: two measured views overlap");
      end = view.end;
    }
  }
  views_ = std::move(views);  // alive while measured_ is keyed by them
  measure_next_ = true;
}

std::optional<UpdateSquares> FusedAdamW::measured(const at::Tensor& view) const {
  const auto it = measured_.find(view.unsafeGetTensorImpl());
  if (it == measured_.end()) return std::nullopt;
  return it->second;
}

bool fused_adamw_applies(const std::vector<at::Tensor>& params,
                         const torch::optim::AdamWOptions& options) {
  if (!fused_kernels_enabled() || options.amsgrad()) return false;
  for (const auto& p : params)
    if (!p.is_cpu() || p.scalar_type() != at::kFloat) return false;
  return true;
}

}  // namespace titan
