#include "llama3/transformer.h"

#include <torch/nn/functional/activation.h>

#include <algorithm>
#include <cmath>

#include "model/layers.h"
#include "model/linear.h"
#include "model/param_storage.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "util/malloc_tuning.h"

namespace titan {

// ---- RoPE ------------------------------------------------------------------------------------

at::Tensor precompute_freqs_cis(int64_t head_dim, int64_t max_seq_len, double theta,
                                const RopeScaling& s) {
  // Computed in float32 like torchtitan, then scaled per frequency in double.
  auto exponents = at::arange(0, head_dim, 2, at::kLong).slice(0, 0, head_dim / 2).to(at::kFloat) /
                   static_cast<float>(head_dim);
  auto freqs = 1.0 / at::pow(theta, exponents).to(at::kFloat);  // (E/2,)
  if (s.enabled) {
    auto acc = freqs.accessor<float, 1>();
    const double low_wavelen = s.original_max_position / s.low_freq_factor;
    const double high_wavelen = s.original_max_position / s.high_freq_factor;
    for (int64_t i = 0; i < freqs.size(0); ++i) {
      const double freq = acc[i];
      const double wavelen = 2 * M_PI / freq;
      double scaled = freq;
      if (wavelen > low_wavelen) {
        scaled = freq / s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        scaled = (1 - smooth) * freq / s.factor + smooth * freq;
      }
      acc[i] = static_cast<float>(scaled);
    }
  }
  auto t = at::arange(max_seq_len, at::kFloat);
  auto angles = at::outer(t, freqs).to(at::kFloat);  // (T, E/2)
  return at::polar(at::ones_like(angles), angles);   // complex64
}

// ---- Attention, FeedForward, block -------------------------------------------------------------

AttentionImpl::AttentionImpl(const ModelArgs& args)
    : n_heads_(args.n_heads), n_kv_heads_(args.kv_heads()), head_dim_(args.head_dim()) {
  wq = register_module("wq", linear_layer(args.dim, n_heads_ * head_dim_));
  wk = register_module("wk", linear_layer(args.dim, n_kv_heads_ * head_dim_));
  wv = register_module("wv", linear_layer(args.dim, n_kv_heads_ * head_dim_));
  wo = register_module("wo", linear_layer(n_heads_ * head_dim_, args.dim));
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& freqs_cis) {
  const auto B = x.size(0), T = x.size(1);
  auto q = linear(wq, x).view({B, T, n_heads_, head_dim_});     // (B, T, H, E)
  auto k = linear(wk, x).view({B, T, n_kv_heads_, head_dim_});  // (B, T, K, E)
  auto v = linear(wv, x).view({B, T, n_kv_heads_, head_dim_});
  q = apply_rotary_emb(q, freqs_cis);
  k = apply_rotary_emb(k, freqs_cis);
  return attend_and_project(q, k, v, wo);
}

TransformerBlockImpl::TransformerBlockImpl(int64_t layer_id, const ModelArgs& args)
    : layer_id_(layer_id), dropout_(args.dropout) {
  attention = register_module("attention", Attention(args));
  feed_forward = register_module("feed_forward", FeedForward(args.dim, args.ffn_hidden_dim()));
  attention_norm = register_module("attention_norm", RMSNorm(args.dim, args.norm_eps));
  ffn_norm = register_module("ffn_norm", RMSNorm(args.dim, args.norm_eps));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& x, const at::Tensor& freqs_cis) {
  auto h = x + at::dropout(attention(attention_norm(x), freqs_cis), dropout_, is_training());
  return h + at::dropout(feed_forward(ffn_norm(h)), dropout_, is_training());
}

void TransformerBlockImpl::init_weights(double weight_init_std, const ParamInit& init) {
  for (auto* w : {&attention->wq->weight, &attention->wk->weight, &attention->wv->weight,
                  &feed_forward->w1->weight}) {
    init(*w, [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); });
  }
  for (auto* w : {&attention->wo->weight, &feed_forward->w2->weight, &feed_forward->w3->weight}) {
    init(*w, [&](at::Tensor& t) { trunc_normal_(t, 0.0, weight_init_std, -2.0, 2.0); });
  }
  for (auto* w : {&attention_norm->weight, &ffn_norm->weight})
    init(*w, [](at::Tensor& t) { t.fill_(1.0); });
}

// ---- Transformer -----------------------------------------------------------------------------

TransformerImpl::TransformerImpl(const ModelArgs& args, const ParamMemory& memory)
    : ModelImpl(args) {
  tok_embeddings =
      register_module("tok_embeddings", torch::nn::Embedding(args.vocab_size, args.dim));
  make_shape_only(*tok_embeddings, memory);
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args.n_layers; ++i) {
    TransformerBlock block(i, args);
    make_shape_only(*block, memory);
    layers->push_back(block);
  }
  norm = register_module("norm", RMSNorm(args.dim, args.norm_eps));
  output = register_module("output", linear_layer(args.dim, args.vocab_size));
  make_shape_only(*norm, memory);
  make_shape_only(*output, memory);
  freqs_cis_ = register_buffer(
      "freqs_cis",
      precompute_freqs_cis(args.head_dim(), args.max_seq_len, args.rope_theta, args.rope_scaling));
}

at::Tensor TransformerImpl::embed(const at::Tensor& tokens) { return tok_embeddings(tokens); }

BlockFunction TransformerImpl::block_function(int64_t layer) {
  auto block = std::static_pointer_cast<TransformerBlockImpl>(layers->ptr(layer));
  return [block, freqs = freqs_cis_](const at::Tensor& x) { return block->forward(x, freqs); };
}

at::Tensor TransformerImpl::final_norm(const at::Tensor& h) { return norm(h); }

at::Tensor TransformerImpl::project(const at::Tensor& h) { return linear(output, h); }

std::vector<at::Tensor> TransformerImpl::unit_parameters(ParamUnit unit, int64_t layer) const {
  switch (unit) {
    case ParamUnit::kEmbedding:
      return tok_embeddings->parameters();
    case ParamUnit::kBlock:
      return layers->ptr(layer)->parameters();
    case ParamUnit::kHead:
      break;
  }
  std::vector<at::Tensor> head = norm->parameters();
  for (const auto& p : output->parameters()) head.push_back(p);
  return head;
}

void TransformerImpl::init_weights(const StartingValues& keep) {
  torch::NoGradGuard no_grad;
  const ParamInit init = param_initializer(*this, keep);
  init(tok_embeddings->weight, [](at::Tensor& t) { t.normal_(0.0, 1.0); });
  for (const auto& layer : *layers) {
    auto* block = layer->as<TransformerBlock>();
    double std = args().depth_init ? 0.02 / std::sqrt(2.0 * (block->layer_id() + 1))
                                   : 0.02 / std::sqrt(2.0 * args().n_layers);
    block->init_weights(std, init);
  }
  init(norm->weight, [](at::Tensor& t) { t.fill_(1.0); });
  const double final_std = 1.0 / std::sqrt(static_cast<double>(args().dim));
  init(output->weight,
       [&](at::Tensor& t) { trunc_normal_(t, 0.0, final_std, -3 * final_std, 3 * final_std); });
}

}  // namespace titan
