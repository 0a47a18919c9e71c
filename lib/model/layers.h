// Layers the model families share, as torchtitan's families build them.
//
// Shapes: B batch, T sequence, D dim, K kv heads, E head_dim.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <functional>

#include "model/model.h"

namespace titan {

// nn.Linear(in, out, bias=False): its weight drawn by libtorch's default init, as PyTorch's.
torch::nn::Linear linear_layer(int64_t in, int64_t out);

// The SwiGLU feed-forward: w2(silu(w1(x)) * w3(x)), (..., D) -> (..., D).
class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t dim, int64_t hidden_dim);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(FeedForward);

// (B, T, K, E) -> (B, T, K * n_rep, E); kv head j serves query heads j*n_rep ... j*n_rep+n_rep-1.
at::Tensor repeat_kv(const at::Tensor& x, int64_t n_rep);

// Causal attention of q: (B, T, H, E) over k, v: (B, T, K, E), each kv head serving H / K query
// heads (repeat_kv), its heads concatenated and projected by `wo`: (B, T, D).
at::Tensor attend_and_project(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const torch::nn::Linear& wo);

// Causal attention with its own scale, of q, k: (B, H, T, Eqk) and v: (B, H, T, Ev) (DeepSeek-V3's
// multi-head latent attention: Ev may differ from Eqk, the scale from 1 / sqrt(Eqk)):
// softmax(q k^T x scale + causal mask) v, (B, H, T, Ev). On causal_attention's kernels: the
// narrower of q/k and v zero-padded to the wider (zeros change no score and no output column),
// and q multiplied by scale x sqrt(width) to put the kernel's 1 / sqrt(width) at `scale`.
at::Tensor scaled_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale);

// ParamMemory::shape_only: `module`'s parameters keep their shape and lose their memory (a no-op
// otherwise), and the freed memory goes back to the kernel.
void make_shape_only(torch::nn::Module& module, const ParamMemory& memory);

// Runs one init fill on a parameter: init(param, fill).
using ParamInit = std::function<void(at::Tensor& param, const std::function<void(at::Tensor&)>&)>;

// The init of `model`'s parameters for ModelImpl::init_weights (called under a NoGradGuard): a
// parameter that holds memory is filled in place; one that holds none (ParamMemory::shape_only)
// is filled whole in a scratch buffer the size of the largest such parameter and handed to
// keep(name, values) (required then). Either way the fill draws the same bits.
ParamInit param_initializer(torch::nn::Module& model, const StartingValues& keep);

}  // namespace titan
