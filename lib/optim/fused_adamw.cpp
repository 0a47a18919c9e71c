#include "optim/fused_adamw.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>

#include "optim/adamw_kernels.h"
#include "optim/optimizer.h"
#include "util/cpu_features.h"

namespace titan {
namespace {

// Elements per parallel task; the update is elementwise, so the split changes no bit.
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
      at::parallel_for(0, p.numel(), kGrain, [&](int64_t begin, int64_t end) {
        const auto update = isa_ == VectorIsa::kAvx512 ? adamw_kernels::avx512::update
                                                       : adamw_kernels::avx2::update;
        update(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, constants);
      });
    }
  }
  return loss;
}

bool fused_adamw_applies(const std::vector<at::Tensor>& params,
                         const torch::optim::AdamWOptions& options) {
  if (!fused_kernels_enabled() || options.amsgrad()) return false;
  for (const auto& p : params)
    if (!p.is_cpu() || p.scalar_type() != at::kFloat) return false;
  return true;
}

}  // namespace titan
