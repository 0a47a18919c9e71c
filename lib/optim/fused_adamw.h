// torch::optim::AdamW with its step done by adamw_kernels.h: the same state, options and
// serialization (checkpoints, snapshots and load() see a torch::optim::AdamW), one pass per
// parameter.
#pragma once

#include <torch/optim/adamw.h>

#include <vector>

#include "util/cpu_features.h"

namespace titan {

class FusedAdamW : public torch::optim::AdamW {
 public:
  // Requires what fused_adamw_applies checks for these params and options. Its steps run the
  // kernels' build for fused_kernel_isa() as it is now.
  FusedAdamW(const std::vector<at::Tensor>& params, const torch::optim::AdamWOptions& options);

  VectorIsa isa() const { return isa_; }

  // libtorch's AdamW::step, each parameter updated by one kernel pass. Throws if a parameter, its
  // gradient or its state is not a contiguous float CPU tensor (titan's always are).
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  VectorIsa isa_;
};

// True when FusedAdamW can run these: a CPU with AVX2+FMA, float CPU parameters, no amsgrad.
bool fused_adamw_applies(const std::vector<at::Tensor>& params,
                         const torch::optim::AdamWOptions& options);

}  // namespace titan
