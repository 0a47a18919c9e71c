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

  // UpdateMeasurer (optimizer.h). A view's sums are over fixed blocks of 32,768 elements from
  // its first (each summed by adamw_kernels' update_measured), added in block order.
  bool covers(const at::Tensor& view) const override;
  void measure_next_step(std::vector<at::Tensor> views) override;
  std::optional<UpdateSquares> measured(const at::Tensor& view) const override;

 private:
  // Updates p's elements [begin, end) and their state with the kernel of isa_; when `squares`,
  // sets it to the update's sums.
  void update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
              const adamw_kernels::StepConstants& c, UpdateSquares* squares) const;
  // Updates all of parameter p, measuring the views of it that were asked for.
  void update_measuring(const at::Tensor& p, float* m, float* v,
                        const adamw_kernels::StepConstants& c);

  VectorIsa isa_;
  // A view to measure: elements [begin, end) of a parameter.
  struct MeasuredView {
    int64_t begin, end;
    const c10::TensorImpl* view;
  };
  bool measure_next_ = false;
  std::vector<at::Tensor> views_;  // the last measure_next_step's
  // Each parameter's views, in order (checked: covered, none overlapping).
  std::unordered_map<const c10::TensorImpl*, std::vector<MeasuredView>> plan_;
  std::unordered_map<const c10::TensorImpl*, UpdateSquares> measured_;
};

// True when FusedAdamW can run these: a CPU with AVX2+FMA, float CPU parameters, no amsgrad.
bool fused_adamw_applies(const std::vector<at::Tensor>& params,
                         const torch::optim::AdamWOptions& options);

}  // namespace titan
