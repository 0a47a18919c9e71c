#include "model/kernels.h"

namespace titan {

ModelKernels model_kernels(const ModelArgs& args, at::Device device, at::ScalarType compute_dtype) {
  ModelKernels k;
  k.attention = attention_kernel_for(args.head_dim(), compute_dtype, device);
  k.swiglu = swiglu_kernel_for(compute_dtype, device);
  k.rms_norm = rms_norm_kernel_for(args.dim, at::kFloat, at::kFloat, device);
  k.linear = linear_kernel_for(compute_dtype, device);
  return k;
}

}  // namespace titan
