#include "model/causal_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/attention_kernels.h"
#include "model/observed_op.h"
#include "util/blas_threads.h"

namespace titan {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Additive mask for query rows [start, end) against keys [0, end): 0 where key <= query, -inf
// elsewhere. Only the last `end - start` key columns can be masked.
at::Tensor block_mask(int64_t start, int64_t end, const at::TensorOptions& options) {
  auto rows = at::arange(start, end, options.dtype(at::kLong)).unsqueeze(1);  // (L, 1)
  auto cols = at::arange(0, end, options.dtype(at::kLong)).unsqueeze(0);      // (1, end)
  auto mask = at::zeros({end - start, end}, options);
  return mask.masked_fill_(cols > rows, -std::numeric_limits<float>::infinity());
}

// Calls fn(first, count) on disjoint ranges of the BH heads, one range per intra-op thread, with
// single-threaded BLAS. The callers then work one head at a time, so that a block's scores stay
// in the core's cache from the matmul through the softmax to the product with v. Each head's
// matrices are far too small for OpenBLAS's own threads (K is the head dim, 16 in the debug model):
// waking and joining them costs more than the multiply, while whole heads split evenly. Every head
// goes through the same calls in the same order whatever the split, so the results are bitwise
// those of one thread (tested).
template <typename Fn>
void for_each_head_range(int64_t heads, const Fn& fn) {
  SingleThreadedBlasScope single_blas;
  at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    // Grad mode and observers are thread-local: the pool's threads need them off as well.
    at::NoGradGuard no_grad;
    at::DisableRecordFunctionGuard unobserved;
    fn(begin, end - begin);
  });
}

// Observers (profilers, the recompute checker) see each kernel as this one op, not the thousands
// of per-head calls inside.
constexpr const char* kOpName = "titan::causal_attention";

struct BlockedCausalAttention : public torch::autograd::Function<BlockedCausalAttention> {
  static variable_list forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v,
                               int64_t block) {
    return {observed_as_one_op(kOpName, {q, k, v},
                               [&] { return compute_forward(ctx, q, k, v, block); })};
  }

  static at::Tensor compute_forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, int64_t block) {
    at::DisableRecordFunctionGuard unobserved;
    const auto B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    auto q3 = q.reshape({B * H, T, D});  // (BH, T, D)
    auto k3 = k.reshape({B * H, T, D});
    auto v3 = v.reshape({B * H, T, D});
    auto out = at::empty_like(q3);
    variable_list saved = {q3, k3, v3};
    std::vector<at::Tensor> masks;
    for (int64_t start = 0; start < T; start += block) {
      const int64_t end = std::min(T, start + block);
      masks.push_back(block_mask(start, end, q.options()));                // (L, end)
      saved.push_back(at::empty({B * H, end - start, end}, q.options()));  // probs, (BH, L, end)
    }
    for_each_head_range(B * H, [&](int64_t first, int64_t count) {
      for (int64_t h = first; h < first + count; ++h) {
        auto qh = q3[h], kh = k3[h], vh = v3[h], outh = out[h];  // (T, D)
        for (size_t i = 0; i < masks.size(); ++i) {
          const int64_t start = static_cast<int64_t>(i) * block, len = masks[i].size(0);
          const int64_t end = start + len;
          auto probs = saved[3 + i][h];  // (L, end)
          at::addmm_out(probs, masks[i], qh.narrow(0, start, len), kh.narrow(0, 0, end).t(), 1.0,
                        scale);
          at::_softmax_out(probs, probs, -1, false);
          auto out_rows = outh.narrow(0, start, len);  // (L, D)
          at::mm_out(out_rows, probs, vh.narrow(0, 0, end));
        }
      }
    });
    ctx->save_for_backward(saved);
    ctx->saved_data["block"] = block;
    ctx->saved_data["shape"] = q.sizes().vec();
    return out.view(q.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::DisableRecordFunctionGuard unobserved;
    auto saved = ctx->get_saved_variables();
    auto q3 = saved[0], k3 = saved[1], v3 = saved[2];
    const int64_t block = ctx->saved_data["block"].toInt();
    auto shape = ctx->saved_data["shape"].toIntVector();
    const auto T = q3.size(1), D = q3.size(2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    auto grad_out = grad_outputs[0].reshape(q3.sizes()).contiguous();  // (BH, T, D)
    auto dq = at::empty_like(q3);
    auto dk = at::zeros_like(k3);
    auto dv = at::zeros_like(v3);
    for_each_head_range(q3.size(0), [&](int64_t first, int64_t count) {
      for (int64_t h = first; h < first + count; ++h) {
        auto qh = q3[h], kh = k3[h], vh = v3[h], goh = grad_out[h];  // (T, D)
        auto dqh = dq[h], dkh = dk[h], dvh = dv[h];
        size_t index = 3;
        for (int64_t start = 0; start < T; start += block, ++index) {
          const int64_t end = std::min(T, start + block), len = end - start;
          auto probs = saved[index][h];         // (L, end)
          auto go = goh.narrow(0, start, len);  // (L, D)
          dvh.narrow(0, 0, end).addmm_(probs.t(), go);
          auto dprobs = at::mm(go, vh.narrow(0, 0, end).t());  // (L, end)
          auto dscores = at::_softmax_backward_data(dprobs, probs, -1, probs.scalar_type());
          auto dq_rows = dqh.narrow(0, start, len);
          at::mm_out(dq_rows, dscores, kh.narrow(0, 0, end)).mul_(scale);
          dkh.narrow(0, 0, end).addmm_(dscores.t(), qh.narrow(0, start, len), 1.0, scale);
        }
      }
    });
    return {dq.view(shape), dk.view(shape), dv.view(shape), at::Tensor()};
  }
};

// A head of a (B, H, T, D) tensor whose last dim is contiguous, as the kernels' Rows.
template <typename RowsType, typename Pointer>
RowsType head_rows(Pointer data, const at::Tensor& t, int64_t head) {
  const int64_t b = head / t.size(1), h = head % t.size(1);
  return {data + b * t.stride(0) + h * t.stride(1), t.stride(2)};
}

// (B, H, T, D) view of a new tensor laid out (B, T, H, D): the layout of the projections' outputs
// that q, k and v are views of, so that the gradients flow back to them without a copy.
at::Tensor empty_heads_view(const at::Tensor& like) {
  return at::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options())
      .transpose(1, 2);
}

at::Tensor with_contiguous_rows(const at::Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

struct FusedCausalAttention : public torch::autograd::Function<FusedCausalAttention> {
  static variable_list forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v) {
    return {observed_as_one_op(kOpName, {q, k, v}, [&] { return compute_forward(ctx, q, k, v); })};
  }

  static at::Tensor compute_forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v) {
    namespace ak = attention_kernels;
    const int64_t T = q.size(2), D = q.size(3), heads = q.size(0) * q.size(1);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    // Contiguous, unlike the gradients: the recompute checker hashes only contiguous op outputs,
    // and this op's output is the one it should name when attention's bits differ.
    auto out = at::empty(q.sizes(), q.options());  // (B, H, T, D)
    // Per query row, what the backward needs to compute its weights again (attention_kernels.h).
    auto row_max = at::empty({heads, T}, q.options());
    auto inverse_sums = at::empty({heads, T}, q.options());
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    float *out_p = out.data_ptr<float>(), *max_p = row_max.data_ptr<float>(),
          *inverse_p = inverse_sums.data_ptr<float>();
    const VectorIsa isa = fused_kernel_isa();
    for_each_head_range(heads, [&](int64_t first, int64_t count) {
      std::vector<float> scratch(static_cast<size_t>(ak::forward_scratch_floats(T, D)));
      for (int64_t h = first; h < first + count; ++h)
        ak::forward_head(isa, head_rows<ak::Rows>(qp, q, h), head_rows<ak::Rows>(kp, k, h),
                         head_rows<ak::Rows>(vp, v, h), scale, T, D,
                         head_rows<ak::MutableRows>(out_p, out, h), max_p + h * T,
                         inverse_p + h * T, scratch.data());
    });
    ctx->save_for_backward({q, k, v, out, row_max, inverse_sums});
    ctx->saved_data["isa"] = static_cast<int64_t>(isa);  // the backward runs the same build
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    namespace ak = attention_kernels;
    at::DisableRecordFunctionGuard unobserved;
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3];
    const auto &row_max = saved[4], &inverse_sums = saved[5];
    const int64_t T = q.size(2), D = q.size(3), heads = q.size(0) * q.size(1);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    auto grad_out = with_contiguous_rows(grad_outputs[0]);  // (B, H, T, D)
    auto dq = empty_heads_view(q), dk = empty_heads_view(k), dv = empty_heads_view(v);
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>(),
                *op = out.data_ptr<float>(), *gp = grad_out.data_ptr<float>(),
                *max_p = row_max.data_ptr<float>(), *inverse_p = inverse_sums.data_ptr<float>();
    float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();
    const auto isa = static_cast<VectorIsa>(ctx->saved_data["isa"].toInt());
    for_each_head_range(heads, [&](int64_t first, int64_t count) {
      std::vector<float> scratch(static_cast<size_t>(ak::backward_scratch_floats(T, D)));
      for (int64_t h = first; h < first + count; ++h)
        ak::backward_head(isa, head_rows<ak::Rows>(qp, q, h), head_rows<ak::Rows>(kp, k, h),
                          head_rows<ak::Rows>(vp, v, h), head_rows<ak::Rows>(op, out, h),
                          head_rows<ak::Rows>(gp, grad_out, h), max_p + h * T, inverse_p + h * T,
                          scale, T, D, head_rows<ak::MutableRows>(dqp, dq, h),
                          head_rows<ak::MutableRows>(dkp, dk, h),
                          head_rows<ak::MutableRows>(dvp, dv, h), scratch.data());
    });
    return {dq, dk, dv};
  }
};

// What the fused kernel can run: the one test behind attention_kernel_for's choice and
// fused_causal_attention's check.
bool fused_kernel_applies(int64_t head_dim, at::ScalarType dtype, at::Device device) {
  return fused_kernels_enabled() && device.is_cpu() && dtype == at::kFloat && head_dim >= 8 &&
         head_dim % 8 == 0;
}

#if TORCH_VERSION_MAJOR >= 2
at::Tensor causal_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
}

// SDPA computes the logsumexp its backward needs only under grad mode with inputs that ask for
// a gradient, and on CUDA that is another kernel (cuDNN's, with other ops and outputs). Under
// no-grad, that is a checkpointed block's first forward, it would not run what the block's
// recomputation (under grad) runs, and the recompute check would name it on its first step. So
// it runs as in training, on detached inputs that ask for a gradient, and the graph is dropped.
at::Tensor sdpa_as_in_training(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (at::GradMode::is_enabled()) return causal_sdpa(q, k, v);
  at::Tensor q_leaf, k_leaf, v_leaf;
  {
    at::DisableRecordFunctionGuard not_ops_of_the_model;
    q_leaf = q.detach().requires_grad_();
    k_leaf = k.detach().requires_grad_();
    v_leaf = v.detach().requires_grad_();
  }
  at::Tensor out;
  {
    at::AutoGradMode grad(true);
    out = causal_sdpa(q_leaf, k_leaf, v_leaf);
  }
  at::DisableRecordFunctionGuard not_ops_of_the_model;
  return out.detach();
}
#endif

}  // namespace

at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    int64_t block) {
  return BlockedCausalAttention::apply(q.contiguous(), k.contiguous(), v.contiguous(), block)[0];
}

AttentionKernel attention_kernel_for(int64_t head_dim, at::ScalarType dtype, at::Device device) {
  // On libtorch 2.x too: Debian's 2.6 CPU scaled_dot_product_attention (its flash kernel) falls
  // from 3,351-4,613 tokens/s at seq_len 256 to 46-170 at 512 on the debug model.
  if (fused_kernel_applies(head_dim, dtype, device)) {
    return fused_kernel_isa() == VectorIsa::kAvx512 ? AttentionKernel::kFusedAvx512
                                                    : AttentionKernel::kFusedAvx2;
  }
#if TORCH_VERSION_MAJOR >= 2
  return AttentionKernel::kTorchSdpa;
#else
  return AttentionKernel::kBlockedAten;
#endif
}

at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && q.size(2) >= 1 &&
                  fused_kernel_applies(q.size(3), q.scalar_type(), q.device()) &&
                  k.sizes() == q.sizes() && v.sizes() == q.sizes() &&
                  k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                  k.device() == q.device() && v.device() == q.device(),
              "fused_causal_attention: needs an AVX2+FMA CPU and float (B, H, T, D) CPU inputs of "
              "one shape, with D a multiple of 8");
  return FusedCausalAttention::apply(with_contiguous_rows(q), with_contiguous_rows(k),
                                     with_contiguous_rows(v))[0];
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  switch (attention_kernel_for(q.size(3), q.scalar_type(), q.device())) {
    case AttentionKernel::kFusedAvx2:
    case AttentionKernel::kFusedAvx512:
      return fused_causal_attention(q, k, v);
    case AttentionKernel::kBlockedAten:
      // One op with its copies to contiguous inside, as the fused kernel's (traces align).
      return observed_as_one_op(kOpName, {q, k, v},
                                [&] { return blocked_causal_attention(q, k, v); });
    case AttentionKernel::kTorchSdpa:
      break;
  }
#if TORCH_VERSION_MAJOR >= 2
  return observed_as_one_op(kOpName, {q, k, v}, [&] { return sdpa_as_in_training(q, k, v); });
#else
  TORCH_CHECK(false, "causal_attention: scaled_dot_product_attention needs libtorch 2");
#endif
}

TITAN_ENUM_NAMES(AttentionKernel, "fused_avx2_fma", "fused_avx512", "blocked_aten", "torch_sdpa")

}  // namespace titan
