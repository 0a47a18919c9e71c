// The kernels a model's float32 layers run on a device, chosen once: the start-up line and
// fingerprint.log's header name them (kernels round differently, so two runs with different ones
// part from step 1).
#pragma once

#include <ATen/ATen.h>

#include "model/causal_attention.h"
#include "model/linear.h"
#include "model/model_args.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"

namespace titan {

struct ModelKernels {
  AttentionKernel attention = AttentionKernel::kBlockedAten;
  SwigluKernel swiglu = SwigluKernel::kAten;
  RmsNormKernel rms_norm = RmsNormKernel::kAten;
  LinearKernel linear = LinearKernel::kAten;
};

// What causal_attention, swiglu, rms_norm and linear pick (the same functions decide when they run)
// for `args`'s layers on `device`, their matmuls computing in `compute_dtype` (bfloat16 under
// autocast): the linear layers and attention and SwiGLU compute in it, RMSNorm the residual stream,
// which stays in the parameters' float32.
ModelKernels model_kernels(const ModelArgs& args, at::Device device,
                           at::ScalarType compute_dtype = at::kFloat);

}  // namespace titan
