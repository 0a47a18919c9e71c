// AdamW as torchtitan configures it, and gradient clipping.
#pragma once

#include <torch/optim/adamw.h>

#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "config/config.h"
#include "config/enums.h"

namespace titan {

// Which implementation of AdamW's step runs. They agree to float rounding, not bitwise.
enum class AdamWKernel {
  kFusedAvx2,    // FusedAdamW (fused_adamw.h): parameters on a CPU with AVX2+FMA
  kFusedAvx512,  // the same (same bits) at AVX-512's width, where the CPU has it
  kTorch,        // torch::optim::AdamW's own step: any other device or CPU
};
// titan's parameters are float on every device (bf16 autocast computes in bf16, keeps them float).
AdamWKernel adamw_kernel_for(at::Device device);
// The kernel `optimizer` (built by build_optimizer) runs: what logs and fingerprint.log report.
AdamWKernel adamw_kernel_of(const torch::optim::AdamW& optimizer);
// to_string spells it for logs and fingerprint.log's header: "fused_avx2_fma", "fused_avx512",
// "torch".
template <>
const std::vector<std::string>& enum_names<AdamWKernel>();

// AdamW over `params` with [optimizer] lr, betas, eps and weight_decay (one group, like
// torchtitan v0.2.2: the same decay for every parameter), its step run by the kernel
// adamw_kernel_for picks for the params' device. Requires params on one device.
std::unique_ptr<torch::optim::AdamW> build_optimizer(const std::vector<at::Tensor>& params,
                                                     const OptimizerConfig& config);

// What an optimizer step measured of one parameter, in float64: the sum of squares of its weights
// after the step, and of the step's change to them (before - after, each difference rounded to
// float as a subtraction of the two tensors would round it).
struct UpdateSquares {
  double weights = 0;
  double change = 0;
};

// An optimizer that measures its own step: the fused AdamW reads each weight before and after
// its update anyway, so measuring costs no pass over memory, where measuring from outside copies
// the weights before the step and reads them three times after it. Measuring changes no bit of
// the step. The sums are the same at any thread count and vector width.
class UpdateMeasurer {
 public:
  virtual ~UpdateMeasurer() = default;
  // Whether `view` lies within one of the optimizer's parameters: a contiguous float tensor on
  // its storage, inside its elements (the parameter itself, or a piece of it such as FSDP's).
  virtual bool covers(const at::Tensor& view) const = 0;
  // Forgets the last measurement; the next step() measures each of `views` that it updates.
  // Throws (c10::Error) unless each is covered and no two overlap.
  virtual void measure_next_step(std::vector<at::Tensor> views) = 0;
  // What the step after the last measure_next_step() measured of `view` (one of those views);
  // nullopt when no step has run since, or the step left its parameter alone (no gradient).
  virtual std::optional<UpdateSquares> measured(const at::Tensor& view) const = 0;
};

// `optimizer` as an UpdateMeasurer when its step measures (FusedAdamW); null otherwise.
UpdateMeasurer* update_measurer(torch::optim::AdamW& optimizer);

// The optimizer's state key for parameter p: libtorch 1.13 keys its state map by the TensorImpl
// address printed as a string, later versions by the address itself.
using AdamWStateMap = std::decay_t<decltype(std::declval<torch::optim::AdamW&>().state())>;
AdamWStateMap::key_type adamw_state_key(const at::Tensor& p);

// Drops the gradients of `params`, as libtorch 2.x's zero_grad() does by default (1.13's zeroes
// them in place): the backward then keeps the gradients it computes instead of adding them to
// zeros, no gradient holds memory during the forward (while the activations build up), and on
// one process a parameter the backward does not reach has none and is left alone by AdamW (the
// sums over ranks and FSDP give it zeros). The gradients' bits are the same, except that a
// gradient of exactly -0 stays -0 (0 + -0 is +0).
void drop_gradients(const std::vector<at::Tensor>& params);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// Scales gradients so their total L2 norm is at most max_norm; returns the norm before clipping.
// kFloat32 is PyTorch's clip_grad_norm_ (each gradient's norm, then the norm of those, in the
// gradients' dtype); kFloat64 sums every square in float64 (the exact norm of the gradients as
// stored) and clips with that.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      GradNormAccumulate accumulate = GradNormAccumulate::kFloat32);

// The norm clip_grad_norm computes (and reports) for these gradients, computed the same way
// (kFloat32: bit for bit PyTorch's), without clipping. Undefined tensors are skipped.
double gradient_norm(const std::vector<at::Tensor>& grads, GradNormAccumulate accumulate);

// gradient_norm as a scalar tensor on the gradients' device (kFloat32: in their dtype, kFloat64:
// float64), for clip_with_norm. Requires: at least one defined gradient.
at::Tensor gradient_norm_tensor(const std::vector<at::Tensor>& grads,
                                GradNormAccumulate accumulate);
// gradient_norm_tensor in two parts, for gradients seen one at a time (FSDP gathers them a unit
// at a time): each one's norm, then the total of those norms, in the gradients' order.
at::Tensor one_gradient_norm(const at::Tensor& grad, GradNormAccumulate accumulate);
at::Tensor total_of_norms(const std::vector<at::Tensor>& norms);

// Scales `grads` in place as clip_grad_norm does for a total norm `total_norm` (a scalar tensor
// as gradient_norm_tensor gives it): the same coefficient bits, so that gradients clipped in
// pieces (FSDP's shards) are bit for bit those clipped whole.
void clip_with_norm(const std::vector<at::Tensor>& grads, const at::Tensor& total_norm,
                    double max_norm, GradNormAccumulate accumulate);

}  // namespace titan
