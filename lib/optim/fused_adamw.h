// torch::optim::AdamW with its step done by adamw_kernels.h: the same state, options and
// serialization (checkpoints, snapshots and load() see a torch::optim::AdamW), one pass per
// parameter.
#pragma once

#include <torch/optim/adamw.h>

#include <optional>
#include <unordered_map>
#include <vector>

#include "optim/adamw_kernels.h"
#include "optim/optimizer.h"
#include "util/cpu_features.h"

namespace titan {

class FusedAdamW : public torch::optim::AdamW, public UpdateMeasurer {
 public:
  // Requires what fused_adamw_applies checks for these params and options. Its steps run the
  // kernels' build for fused_kernel_isa() as it is now.
  FusedAdamW(const std::vector<at::Tensor>& params, const torch::optim::AdamWOptions& options);

  VectorIsa isa() const { return isa_; }

  // libtorch's AdamW::step, each parameter updated by one kernel pass. Throws if a parameter, its
  // gradient or its state is not a contiguous float CPU tensor (titan's always are).
  at::Tensor step(LossClosure closure = nullptr) override;

  // UpdateMeasurer (optimizer.h). A measured parameter's sums are over fixed blocks of 32,768
  // elements (each summed by adamw_kernels' update_measured), added in block order.
  bool updates(const at::Tensor& p) const override;
  void measure_next_step() override;
  std::optional<UpdateSquares> measured(const at::Tensor& p) const override;

 private:
  // Updates p (n floats) and its state with the kernel of isa_; when `squares`, sets it to the
  // update's sums.
  void update(float* p, const float* g, float* m, float* v, int64_t n,
              const adamw_kernels::StepConstants& c, UpdateSquares* squares) const;

  VectorIsa isa_;
  bool measure_next_ = false;
  std::unordered_map<const c10::TensorImpl*, UpdateSquares> measured_;
};

// True when FusedAdamW can run these: a CPU with AVX2+FMA, float CPU parameters, no amsgrad.
bool fused_adamw_applies(const std::vector<at::Tensor>& params,
                         const torch::optim::AdamWOptions& options);

}  // namespace titan
