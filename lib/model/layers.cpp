#include "model/layers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>

#include "model/causal_attention.h"
#include "model/linear.h"
#include "model/param_storage.h"
#include "model/swiglu.h"
#include "util/malloc_tuning.h"

namespace titan {

torch::nn::Linear linear_layer(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

FeedForwardImpl::FeedForwardImpl(int64_t dim, int64_t hidden_dim) {
  w1 = register_module("w1", linear_layer(dim, hidden_dim));
  w2 = register_module("w2", linear_layer(hidden_dim, dim));
  w3 = register_module("w3", linear_layer(dim, hidden_dim));
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  return linear(w2, swiglu(linear(w1, x), linear(w3, x)));
}

at::Tensor repeat_kv(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto B = x.size(0), T = x.size(1), K = x.size(2), E = x.size(3);
  return x.unsqueeze(3).expand({B, T, K, n_rep, E}).reshape({B, T, K * n_rep, E});
}

at::Tensor attend_and_project(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const torch::nn::Linear& wo) {
  const auto B = q.size(0), T = q.size(1), H = q.size(2), E = q.size(3);
  const int64_t n_rep = H / k.size(2);
  auto out = causal_attention(q.transpose(1, 2), repeat_kv(k, n_rep).transpose(1, 2),
                              repeat_kv(v, n_rep).transpose(1, 2));  // (B, H, T, E)
  return linear(wo, out.transpose(1, 2).reshape({B, T, H * E}));
}

at::Tensor scaled_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale) {
  const int64_t qk = q.size(-1), ev = v.size(-1), width = std::max(qk, ev);
  const auto widen = [width](const at::Tensor& t) {
    return t.size(-1) == width ? t : at::constant_pad_nd(t, {0, width - t.size(-1)});
  };
  const double unit = 1.0 / std::sqrt(static_cast<double>(width));
  const at::Tensor q_scaled = scale == unit ? q : q * (scale / unit);
  auto out = causal_attention(widen(q_scaled), widen(k), widen(v));  // (B, H, T, width)
  return ev == width ? out : out.narrow(-1, 0, ev);
}

void make_shape_only(torch::nn::Module& module, const ParamMemory& memory) {
  if (!memory.shape_only) return;
  for (auto& p : module.parameters())
    p.set_data(shape_only(p.sizes(), p.options().device(memory.device)));
  // The freed weights lie between the module's small allocations, and the next layer's aligned
  // requests do not fit those holes exactly: without a trim each block would stay resident.
  return_free_heap_to_kernel();
}

ParamInit param_initializer(torch::nn::Module& model, const StartingValues& keep) {
  auto names = std::make_shared<std::unordered_map<const void*, std::string>>();
  int64_t largest = 0;
  for (const auto& p : model.named_parameters()) {
    (*names)[p.value().unsafeGetTensorImpl()] = p.key();
    if (storage_released(p.value())) largest = std::max(largest, p.value().numel());
  }
  // One buffer for the values of every parameter without memory: fresh ones of each size would
  // leave holes that stay resident. A contiguous view draws the same bits as a tensor of its own.
  at::Tensor scratch;
  if (largest > 0) scratch = at::empty({largest}, model.parameters().front().options());
  return [names, scratch, keep](at::Tensor& param, const std::function<void(at::Tensor&)>& fill) {
    if (!storage_released(param)) {
      fill(param);
      return;
    }
    TORCH_CHECK(keep, "init_weights: a parameter without memory needs somewhere to keep values");
    at::Tensor values = scratch.narrow(0, 0, param.numel()).view(param.sizes());
    fill(values);
    keep(names->at(param.unsafeGetTensorImpl()), values);
  };
}

}  // namespace titan
