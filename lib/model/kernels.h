// The kernels a model's float32 layers run on a device, chosen once: the start-up line and
// fingerprint.log's header name them (kernels round differently, so two runs with different ones
// part from step 1).
#pragma once

#include <ATen/ATen.h>

#include "model/causal_attention.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"

namespace titan {

struct ModelKernels {
  AttentionKernel attention = AttentionKernel::kBlockedAten;
  SwigluKernel swiglu = SwigluKernel::kAten;
  RmsNormKernel rms_norm = RmsNormKernel::kAten;
};

// What causal_attention, swiglu and rms_norm pick for `args`'s float32 layers on `device`.
ModelKernels model_kernels(const ModelArgs& args, at::Device device);

}  // namespace titan
