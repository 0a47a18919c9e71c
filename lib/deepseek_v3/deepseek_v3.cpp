#include "deepseek_v3/deepseek_v3.h"

#include <cmath>
#include <string>

#include "model/linear.h"

namespace titan::deepseek_v3 {

BlockImpl::BlockImpl(int64_t layer_id, const ModelArgs& args) : layer_id_(layer_id) {
  attention = register_module("attention", Attention(args));
  attention_norm = register_module("attention_norm", RMSNorm(args.dim, args.norm_eps));
  ffn_norm = register_module("ffn_norm", RMSNorm(args.dim, args.norm_eps));
  if (args.is_moe_layer(layer_id)) {
    moe = register_module("moe", moe::MoE(*args.moe, args.dim, args.moe_inter_dim));
  } else {
    feed_forward = register_module("feed_forward", FeedForward(args.dim, args.ffn_hidden_dim()));
  }
}

at::Tensor BlockImpl::forward(const at::Tensor& x, const at::Tensor& freqs_cis) {
  auto h = x + attention(attention_norm(x), freqs_cis);
  return h + (moe ? moe(ffn_norm(h)) : feed_forward(ffn_norm(h)));
}

void BlockImpl::init_weights(const ParamInit& init) {
  const double std = 0.02 / std::pow(2.0 * static_cast<double>(layer_id_ + 1), 0.5);
  for (auto* w : {&attention_norm->weight, &ffn_norm->weight})
    init(*w, [](at::Tensor& t) { t.fill_(1.0); });
  attention->init_weights(std, init);
  if (moe) {
    moe->init_weights(std, init);
    return;
  }
  init(feed_forward->w1->weight, [](at::Tensor& t) { trunc_normal_(t, 0.0, 0.02, -2.0, 2.0); });
  for (auto* w : {&feed_forward->w2->weight, &feed_forward->w3->weight})
    init(*w, [&](at::Tensor& t) { trunc_normal_(t, 0.0, std, -2.0, 2.0); });
}

DeepSeekV3Impl::DeepSeekV3Impl(const ModelArgs& args, const ParamMemory& memory) : ModelImpl(args) {
  tok_embeddings =
      register_module("tok_embeddings", torch::nn::Embedding(args.vocab_size, args.dim));
  make_shape_only(*tok_embeddings, memory);
  freqs_cis_ = register_buffer("freqs_cis", precompute_freqs_cis(args));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args.n_layers; ++i) {
    Block block(i, args);
    make_shape_only(*block, memory);
    layers->push_back(block);
  }
  norm = register_module("norm", RMSNorm(args.dim, args.final_norm_eps.value_or(args.norm_eps)));
  make_shape_only(*norm, memory);
  output = register_module("output", linear_layer(args.dim, args.vocab_size));
  make_shape_only(*output, memory);
}

at::Tensor DeepSeekV3Impl::embed(const at::Tensor& tokens) { return tok_embeddings(tokens); }

BlockFunction DeepSeekV3Impl::block_function(int64_t layer) {
  auto block = std::static_pointer_cast<BlockImpl>(layers->ptr(layer));
  return [block, freqs = freqs_cis_](const at::Tensor& x) { return block->forward(x, freqs); };
}

at::Tensor DeepSeekV3Impl::final_norm(const at::Tensor& h) { return norm(h); }

at::Tensor DeepSeekV3Impl::project(const at::Tensor& h) { return linear(output, h); }

std::vector<at::Tensor> DeepSeekV3Impl::unit_parameters(ParamUnit unit, int64_t layer) const {
  switch (unit) {
    case ParamUnit::kEmbedding:
      return tok_embeddings->parameters();
    case ParamUnit::kBlock:
      return layers->ptr(layer)->parameters();
    case ParamUnit::kHead:
      break;
  }
  std::vector<at::Tensor> head = norm->parameters();
  head.push_back(output->weight);
  return head;
}

std::vector<ExpertLoad> DeepSeekV3Impl::expert_loads() const {
  return moe::expert_loads_of(layers);
}

void DeepSeekV3Impl::init_weights(const StartingValues& keep) {
  torch::NoGradGuard no_grad;
  const ParamInit init = param_initializer(*this, keep);
  init(tok_embeddings->weight, [](at::Tensor& t) { t.normal_(0.0, 1.0); });
  for (const auto& layer : *layers) layer->as<Block>()->init_weights(init);
  init(norm->weight, [](at::Tensor& t) { t.fill_(1.0); });
  const double final_std = std::pow(static_cast<double>(args().dim), -0.5);  // dim**-0.5
  init(output->weight,
       [&](at::Tensor& t) { trunc_normal_(t, 0.0, final_std, -3 * final_std, 3 * final_std); });
}

}  // namespace titan::deepseek_v3
