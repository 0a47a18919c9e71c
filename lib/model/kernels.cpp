#include "model/kernels.h"

namespace titan {

ModelKernels model_kernels(const ModelArgs& args, at::Device device) {
  ModelKernels k;
  k.attention = attention_kernel_for(args.head_dim(), at::kFloat, device);
  k.swiglu = swiglu_kernel_for(at::kFloat, device);
  k.rms_norm = rms_norm_kernel_for(args.dim, at::kFloat, device);
  return k;
}

}  // namespace titan
