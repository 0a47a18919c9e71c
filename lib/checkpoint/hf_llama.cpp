#include "checkpoint/hf_llama.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>
#include <utility>

#include "util/strings.h"

namespace titan {
namespace {

// Names inside a layer: titan-train's after "layers.N.", Hugging Face's after "model.layers.N.".
const std::pair<const char*, const char*> kLayerNames[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"attention_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attention.q_norm.weight", "self_attn.q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight"},
};

const HfFamily kHfFamilies[] = {
    {"llama3", "Llama", "llama", "LlamaForCausalLM", true},
    {"qwen3", "Qwen3", "qwen3", "Qwen3ForCausalLM", false},
};

const std::pair<const char*, const char*> kModelNames[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// For "<prefix>N.<rest>" with N decimal without leading zeros: N and rest.
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name,
                                                               const std::string& prefix) {
  if (!starts_with(name, prefix)) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string number = name.substr(prefix.size(), dot - prefix.size());
  if (number.empty() || number.size() > 9 ||
      number.find_first_not_of("0123456789") != std::string::npos ||
      (number.size() > 1 && number[0] == '0')) {
    return std::nullopt;
  }
  return std::make_pair(number, name.substr(dot + 1));
}

at::Tensor reorder_rows(const at::Tensor& w, int64_t n_heads, bool to_hf) {
  TORCH_CHECK(w.dim() == 2 && n_heads > 0 && w.size(0) % (2 * n_heads) == 0,
              "a q/k weight of shape ", w.sizes(), " cannot be split into ", n_heads,
              " heads of pairs");
  const int64_t rows = w.size(0), cols = w.size(1), half = rows / n_heads / 2;
  // to_hf: (head, pair i, j) -> (head, j, pair i); from_hf the other way.
  const auto view = to_hf ? std::vector<int64_t>{n_heads, half, 2, cols}
                          : std::vector<int64_t>{n_heads, 2, half, cols};
  return w.reshape(view).transpose(1, 2).contiguous().reshape({rows, cols});
}

}  // namespace

const HfFamily& hf_family(const ModelArgs& args) {
  for (const HfFamily& f : kHfFamilies) {
    if (f.family == args.family) return f;
  }
  throw std::invalid_argument(
      fmt::format("model family \"{}\" has no Hugging Face layout", args.family));
}

void require_hf_layout(const ModelArgs& args, const std::string& where) {
  if (!args.moe) return;
  throw ConfigError(where,
                    fmt::format("a Hugging Face checkpoint of {} (a mixture-of-experts model) "
                                "cannot be read or written yet: its per-expert tensors are not "
                                "mapped to titan-train's stacked experts",
                                hf_family(args).title),
                    "use titan-train's own checkpoints (export without --hf writes one "
                    "safetensors file under torchtitan's names)");
}

std::string titan_to_hf_name(const std::string& titan_name) {
  for (const auto& [titan, hf] : kModelNames) {
    if (titan_name == titan) return hf;
  }
  if (auto layer = split_layer(titan_name, "layers.")) {
    for (const auto& [titan, hf] : kLayerNames) {
      if (layer->second == titan) return "model.layers." + layer->first + "." + hf;
    }
  }
  throw std::invalid_argument(
      fmt::format("\"{}\" is not a parameter of a Llama 3 or Qwen3 model", titan_name));
}

std::optional<std::string> hf_to_titan_name(const std::string& hf_name) {
  for (const auto& [titan, hf] : kModelNames) {
    if (hf_name == hf) return std::string(titan);
  }
  if (auto layer = split_layer(hf_name, "model.layers.")) {
    for (const auto& [titan, hf] : kLayerNames) {
      if (layer->second == hf) return "layers." + layer->first + "." + titan;
    }
  }
  return std::nullopt;
}

bool is_skipped_hf_tensor(const std::string& hf_name) {
  auto layer = split_layer(hf_name, "model.layers.");
  return layer && layer->second == "self_attn.rotary_emb.inv_freq";
}

at::Tensor permute_to_hf(const at::Tensor& w, int64_t n_heads) {
  return reorder_rows(w, n_heads, true);
}

at::Tensor permute_from_hf(const at::Tensor& w, int64_t n_heads) {
  return reorder_rows(w, n_heads, false);
}

int64_t permuted_heads(const std::string& titan_name, const ModelArgs& args) {
  if (!hf_family(args).permutes_qk) return 0;
  if (auto layer = split_layer(titan_name, "layers.")) {
    if (layer->second == "attention.wq.weight") return args.n_heads;
    if (layer->second == "attention.wk.weight") return args.kv_heads();
  }
  return 0;
}

std::vector<ParameterShape> model_parameter_shapes(const ModelArgs& a) {
  const int64_t d = a.dim, q = a.n_heads * a.head_dim(), kv = a.kv_heads() * a.head_dim();
  const int64_t f = a.ffn_hidden_dim(), e = a.head_dim();
  std::vector<ParameterShape> out = {{"tok_embeddings.weight", {a.vocab_size, d}}};
  for (int64_t i = 0; i < a.n_layers; ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    if (a.qk_norm) {  // registered first, as torchtitan's Attention does
      out.push_back({p + "attention.q_norm.weight", {e}});
      out.push_back({p + "attention.k_norm.weight", {e}});
    }
    out.push_back({p + "attention.wq.weight", {q, d}});
    out.push_back({p + "attention.wk.weight", {kv, d}});
    out.push_back({p + "attention.wv.weight", {kv, d}});
    out.push_back({p + "attention.wo.weight", {d, q}});
    out.push_back({p + "feed_forward.w1.weight", {f, d}});
    out.push_back({p + "feed_forward.w2.weight", {d, f}});
    out.push_back({p + "feed_forward.w3.weight", {f, d}});
    out.push_back({p + "attention_norm.weight", {d}});
    out.push_back({p + "ffn_norm.weight", {d}});
  }
  out.push_back({"norm.weight", {d}});
  if (!a.tie_embeddings) out.push_back({"output.weight", {a.vocab_size, d}});
  return out;
}

bool hf_ties_embeddings(const std::string& family, const std::string& flavor) {
  return family == "llama3" && flavor == "1B";
}

bool same_tensor_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor x = a.detach().to(at::kCPU).contiguous();
  const at::Tensor y = b.detach().to(at::kCPU).contiguous();
  return x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace titan
