#include "qwen3/qwen3.h"

#include <cmath>
#include <stdexcept>

#include "model/linear.h"

namespace titan::qwen3 {

namespace {
struct DenseFlavor {
  const char* name;
  int64_t vocab_size, dim, n_layers, n_heads, hidden_dim;
  bool tied;
  int64_t n_kv_heads = 8, head_dim = 128;
};
// torchtitan v0.2.2's qwen3_args (models/qwen3/__init__.py): every one with 8 kv heads, head_dim
// 128, qk_norm, rope_theta 1e6 and RMSNorm eps 1e-6. tiny is titan-train's own, for tests: small,
// tied, with GQA and a head_dim beside dim / n_heads.
const DenseFlavor kDense[] = {
    {"tiny", 512, 64, 2, 4, 128, true, 2, 32},   {"debugmodel", 2048, 256, 8, 16, 3072, true},
    {"0.6B", 151936, 1024, 28, 16, 3072, true},  {"1.7B", 151936, 2048, 28, 16, 6144, true},
    {"4B", 151936, 2560, 36, 32, 9728, true},    {"8B", 151936, 4096, 36, 32, 12288, false},
    {"14B", 151936, 5120, 40, 40, 17408, false}, {"32B", 151936, 5120, 64, 64, 25600, false},
};

// torchtitan v0.2.2's Qwen3-MoE flavors: no shared experts, softmax scores, route_norm,
// route_scale 1, the scores applied after the experts. tiny_moe is titan-train's own, for tests:
// tiny's attention with 8 experts, 2 per token.
struct MoeFlavor {
  const char* name;
  DenseFlavor attention;  // its hidden_dim unused: every block is MoE
  int64_t moe_inter_dim, num_experts, top_k, max_seq_len;
  double rope_theta;
};
const MoeFlavor kMoe[] = {
    {"tiny_moe", {"", 512, 64, 2, 4, 128, false, 2, 32}, 32, 8, 2, 4096, 1e6},
    {"debugmodel_moe", {"", 2048, 256, 8, 16, 3072, false}, 768, 64, 8, 4096, 1e6},
    {"30B-A3B", {"", 151936, 2048, 48, 32, 6144, false, 4}, 768, 128, 8, 262144, 1e6},
    {"235B-A22B", {"", 151936, 4096, 94, 64, 12288, false, 4}, 1536, 128, 8, 4096, 5e6},
};

ModelArgs dense_args(const DenseFlavor& f) {
  ModelArgs a;
  a.family = "qwen3";
  a.vocab_size = f.vocab_size, a.dim = f.dim, a.n_layers = f.n_layers, a.n_heads = f.n_heads;
  a.n_kv_heads = f.n_kv_heads;
  a.head_dim_override = f.head_dim;
  a.hidden_dim = f.hidden_dim;
  a.qk_norm = true;
  a.tie_embeddings = f.tied;
  a.norm_eps = 1e-6;
  a.rope_theta = 1e6;
  a.rope_scaling.enabled = false;
  a.max_seq_len = 4096;
  return a;
}
}  // namespace

const std::vector<std::string>& flavors() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const DenseFlavor& f : kDense) out.push_back(f.name);
    for (const MoeFlavor& f : kMoe) out.push_back(f.name);
    return out;
  }();
  return names;
}

ModelArgs flavor_args(const std::string& flavor) {
  for (const DenseFlavor& f : kDense) {
    if (flavor != f.name) continue;
    return dense_args(f);
  }
  for (const MoeFlavor& f : kMoe) {
    if (flavor != f.name) continue;
    ModelArgs a = dense_args(f.attention);
    a.moe_inter_dim = f.moe_inter_dim;
    a.max_seq_len = f.max_seq_len;
    a.rope_theta = f.rope_theta;
    MoEArgs m;
    m.num_experts = f.num_experts;
    m.num_shared_experts = 0;
    m.top_k = f.top_k;
    m.score_func = "softmax";
    m.route_norm = true;
    m.route_scale = 1.0;
    m.score_before_experts = false;
    a.moe = m;
    return a;
  }
  throw std::invalid_argument("no qwen3 flavor \"" + flavor + "\"");
}

at::Tensor precompute_rope_cache(int64_t head_dim, int64_t max_seq_len, double theta) {
  // float32 throughout, in torchtitan's order of operations.
  auto exponents = at::arange(0, head_dim, 2, at::kLong).slice(0, 0, head_dim / 2).to(at::kFloat) /
                   static_cast<float>(head_dim);
  auto freqs = 1.0 / at::pow(theta, exponents).to(at::kFloat);  // (E/2,)
  auto t = at::arange(max_seq_len, at::kFloat);
  auto angles = at::outer(t, freqs).to(at::kFloat);  // (T, E/2)
  auto both = at::cat({angles, angles}, -1);         // (T, E)
  return at::cat({both.cos(), both.sin()}, -1);      // (T, 2E)
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& rope_cache) {
  const auto T = x.size(1), E = x.size(3);
  auto cache = rope_cache.slice(0, 0, T).view({1, T, 1, 2 * E});
  auto cos = cache.slice(-1, 0, E).to(x.scalar_type());
  auto sin = cache.slice(-1, E, 2 * E).to(x.scalar_type());
  auto rotated = at::cat({-x.slice(-1, E / 2, E), x.slice(-1, 0, E / 2)}, -1);
  return x * cos + rotated * sin;  // (B, T, H, E)
}

AttentionImpl::AttentionImpl(const ModelArgs& args)
    : n_heads_(args.n_heads), n_kv_heads_(args.kv_heads()), head_dim_(args.head_dim()) {
  if (args.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, args.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, args.norm_eps));
  }
  wq = register_module("wq", linear_layer(args.dim, n_heads_ * head_dim_));
  wk = register_module("wk", linear_layer(args.dim, n_kv_heads_ * head_dim_));
  wv = register_module("wv", linear_layer(args.dim, n_kv_heads_ * head_dim_));
  wo = register_module("wo", linear_layer(n_heads_ * head_dim_, args.dim));
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& rope_cache) {
  const auto B = x.size(0), T = x.size(1);
  auto q = linear(wq, x).view({B, T, n_heads_, head_dim_});     // (B, T, H, E)
  auto k = linear(wk, x).view({B, T, n_kv_heads_, head_dim_});  // (B, T, K, E)
  auto v = linear(wv, x).view({B, T, n_kv_heads_, head_dim_});
  if (q_norm) q = q_norm(q);
  if (k_norm) k = k_norm(k);
  q = apply_rope(q, rope_cache);
  k = apply_rope(k, rope_cache);
  return attend_and_project(q, k, v, wo);
}

BlockImpl::BlockImpl(int64_t layer_id, const ModelArgs& args) : layer_id_(layer_id) {
  attention = register_module("attention", Attention(args));
  if (args.is_moe_layer(layer_id)) {
    moe = register_module("moe", moe::MoE(*args.moe, args.dim, args.moe_inter_dim));
  } else {
    feed_forward = register_module("feed_forward", FeedForward(args.dim, args.ffn_hidden_dim()));
  }
  attention_norm = register_module("attention_norm", RMSNorm(args.dim, args.norm_eps));
  ffn_norm = register_module("ffn_norm", RMSNorm(args.dim, args.norm_eps));
}

at::Tensor BlockImpl::forward(const at::Tensor& x, const at::Tensor& rope_cache) {
  auto h = x + attention(attention_norm(x), rope_cache);
  return h + (moe ? moe(ffn_norm(h)) : feed_forward(ffn_norm(h)));
}

void BlockImpl::init_weights(double weight_init_std, const ParamInit& init) {
  const auto ones = [](at::Tensor& t) { t.fill_(1.0); };
  const auto std_002 = [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); };
  const auto std_layer = [&](at::Tensor& t) { trunc_normal_(t, 0.0, weight_init_std, -2.0, 2.0); };
  for (auto* w : {&attention_norm->weight, &ffn_norm->weight}) init(*w, ones);
  for (auto* w : {&attention->wq->weight, &attention->wk->weight, &attention->wv->weight})
    init(*w, std_002);
  init(attention->wo->weight, std_layer);
  if (attention->q_norm) init(attention->q_norm->weight, ones);
  if (attention->k_norm) init(attention->k_norm->weight, ones);
  if (moe) {
    moe->init_weights(weight_init_std, init);
    return;
  }
  init(feed_forward->w1->weight, std_002);
  for (auto* w : {&feed_forward->w2->weight, &feed_forward->w3->weight}) init(*w, std_layer);
}

Qwen3Impl::Qwen3Impl(const ModelArgs& args, const ParamMemory& memory) : ModelImpl(args) {
  tok_embeddings =
      register_module("tok_embeddings", torch::nn::Embedding(args.vocab_size, args.dim));
  make_shape_only(*tok_embeddings, memory);
  rope_cache_ = register_buffer(
      "rope_cache", precompute_rope_cache(args.head_dim(), args.max_seq_len, args.rope_theta));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args.n_layers; ++i) {
    Block block(i, args);
    make_shape_only(*block, memory);
    layers->push_back(block);
  }
  norm = register_module("norm", RMSNorm(args.dim, args.norm_eps));
  make_shape_only(*norm, memory);
  // torchtitan makes the output layer even when it ties it (its default init draws from the
  // generator the init then continues from), then points it at the embedding's weight.
  torch::nn::Linear made = linear_layer(args.dim, args.vocab_size);
  if (args.tie_embeddings) return;
  output = register_module("output", made);
  make_shape_only(*output, memory);
}

at::Tensor Qwen3Impl::embed(const at::Tensor& tokens) { return tok_embeddings(tokens); }

BlockFunction Qwen3Impl::block_function(int64_t layer) {
  auto block = std::static_pointer_cast<BlockImpl>(layers->ptr(layer));
  return [block, cache = rope_cache_](const at::Tensor& x) { return block->forward(x, cache); };
}

at::Tensor Qwen3Impl::final_norm(const at::Tensor& h) { return norm(h); }

at::Tensor Qwen3Impl::project(const at::Tensor& h) {
  return output ? linear(output, h) : linear_by_weight(tok_embeddings->weight, h);
}

std::vector<at::Tensor> Qwen3Impl::unit_parameters(ParamUnit unit, int64_t layer) const {
  switch (unit) {
    case ParamUnit::kEmbedding:
      return tok_embeddings->parameters();
    case ParamUnit::kBlock:
      return layers->ptr(layer)->parameters();
    case ParamUnit::kHead:
      break;
  }
  std::vector<at::Tensor> head = norm->parameters();
  if (output) head.push_back(output->weight);
  return head;
}

std::vector<ExpertLoad> Qwen3Impl::expert_loads() const { return moe::expert_loads_of(layers); }

void Qwen3Impl::init_weights(const StartingValues& keep) {
  torch::NoGradGuard no_grad;
  const ParamInit init = param_initializer(*this, keep);
  init(tok_embeddings->weight, [](at::Tensor& t) { t.normal_(0.0, 1.0); });
  for (const auto& layer : *layers) {
    auto* block = layer->as<Block>();
    const double std = args().depth_init ? 0.02 / std::sqrt(2.0 * (block->layer_id() + 1))
                                         : 0.02 / std::sqrt(2.0 * args().n_layers);
    block->init_weights(std, init);
  }
  init(norm->weight, [](at::Tensor& t) { t.fill_(1.0); });
  // Tied, the output's init is the embedding's final value (torchtitan draws it over the normal).
  at::Tensor& out = output ? output->weight : tok_embeddings->weight;
  const double final_std = 1.0 / std::sqrt(static_cast<double>(args().dim));
  init(out,
       [&](at::Tensor& t) { trunc_normal_(t, 0.0, final_std, -3 * final_std, 3 * final_std); });
}

}  // namespace titan::qwen3
