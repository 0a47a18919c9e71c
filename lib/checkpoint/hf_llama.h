// Hugging Face's layouts of the families titan-train trains (transformers' LlamaForCausalLM and
// Qwen3ForCausalLM) against titan-train's (torchtitan's) parameters: names, the q/k row
// permutation between two RoPE layouts, and the shapes a model's parameters have.
//
// Names, as torchtitan's Llama3StateDictAdapter and Qwen3StateDictAdapter map them:
//   model.embed_tokens.weight                        tok_embeddings.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight   layers.N.attention.{wq,wk,wv,wo}.weight
//   model.layers.N.mlp.gate_proj.weight              layers.N.feed_forward.w1.weight
//   model.layers.N.mlp.down_proj.weight              layers.N.feed_forward.w2.weight
//   model.layers.N.mlp.up_proj.weight                layers.N.feed_forward.w3.weight
//   model.layers.N.input_layernorm.weight            layers.N.attention_norm.weight
//   model.layers.N.post_attention_layernorm.weight   layers.N.ffn_norm.weight
//   model.layers.N.self_attn.{q,k}_norm.weight       layers.N.attention.{q,k}_norm.weight (Qwen3)
//   model.norm.weight                                norm.weight
//   lm_head.weight                                   output.weight
// model.layers.N.self_attn.rotary_emb.inv_freq (a RoPE table some old exports carry) has no
// titan-train counterpart and is skipped on load.
//
// RoPE (Llama 3 only: Qwen3 rotates halves in both, and nothing is permuted): titan-train rotates
// interleaved pairs (2i, 2i+1) of each head (torchtitan, Meta's
// original Llama); transformers rotates halves (i, i + head_dim/2). The same model therefore
// stores wq and wk with the rows of each head reordered: row h*E + 2i + j of titan-train's is
// row h*E + j*E/2 + i of Hugging Face's (E head_dim, j in {0, 1}). That is the permutation of
// transformers' convert_llama_weights_to_hf.py and torchtitan's adapter; wv, wo and the rest
// are stored alike.
//
// Tied embeddings, Qwen3 (enable_weight_tying): the model holds no output.weight; config.json must
// set tie_word_embeddings, lm_head.weight is never written and, when a file holds one, skipped on
// load as transformers ignores it.
//
// Tied embeddings, Llama 3: titan-train always has its own output.weight. Loading a checkpoint
// whose config.json says tie_word_embeddings, output.weight is embed_tokens (as transformers ties
// lm_head to it, whatever lm_head.weight the files hold). Writing, lm_head.weight is left out
// and tie_word_embeddings set only when asked to tie (hf_ties_embeddings of the flavor: Llama
// 3.2 1B's release ties them) and output.weight equals tok_embeddings.weight bit for bit, so an
// imported tied checkpoint goes back out tied, byte for byte, and a trained (untied) one keeps
// its own lm_head.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "config/enums.h"
#include "model/model_args.h"

namespace titan {

// A family's Hugging Face model: config.json's model_type and architecture, and whether wq and wk
// are stored permuted (permute_to_hf).
struct HfFamily {
  std::string family;  // model.name
  std::string title;   // "Llama", "Qwen3": in messages
  std::string model_type;
  std::string architecture;
  bool permutes_qk = false;
};

// The Hugging Face model of `args.family`. Throws std::invalid_argument for a family without one.
const HfFamily& hf_family(const ModelArgs& args);

// Throws ConfigError naming `where` unless a Hugging Face checkpoint of `args` can be read and
// written here (mixture-of-experts models cannot yet: their per-expert tensors are not mapped).
void require_hf_layout(const ModelArgs& args, const std::string& where);

// The Hugging Face name of a titan-train parameter. Throws std::invalid_argument for a name
// that no family's layout has.
std::string titan_to_hf_name(const std::string& titan_name);

// The titan-train name of a Hugging Face tensor, or nullopt for a name this layout does not
// have (inv_freq included: see is_skipped_hf_tensor). Layer numbers are copied, not checked
// against a model.
std::optional<std::string> hf_to_titan_name(const std::string& hf_name);

// Tensors a Hugging Face checkpoint may hold that titan-train has no parameter for and skips:
// model.layers.N.self_attn.rotary_emb.inv_freq.
bool is_skipped_hf_tensor(const std::string& hf_name);

// Titan-train's wq (n_heads = n_heads) or wk (n_heads = n_kv_heads), (n_heads * E, D), in
// Hugging Face's row order; and back. permute_from_hf(permute_to_hf(w, n), n) is w bit for bit.
// Both return new contiguous tensors.
at::Tensor permute_to_hf(const at::Tensor& w, int64_t n_heads);
at::Tensor permute_from_hf(const at::Tensor& w, int64_t n_heads);

// How many heads a titan-train parameter's rows are permuted by between the layouts: for a
// family that permutes (HfFamily::permutes_qk) n_heads for wq, kv heads for wk; else 0.
int64_t permuted_heads(const std::string& titan_name, const ModelArgs& args);

struct ParameterShape {
  std::string name;  // titan-train's
  std::vector<int64_t> sizes;
};

// The parameters the model `args` builds, in module order (Model's named_parameters),
// with their shapes, computed without building the model (q/k norms with args.qk_norm; no
// output.weight with args.tie_embeddings).
std::vector<ParameterShape> model_parameter_shapes(const ModelArgs& args);

// Whether the Hugging Face release of a Llama 3 flavor ties lm_head to embed_tokens without the
// model tying them (Llama 3.2 1B does; 8B, 70B and 405B do not; the test flavors have no release
// and say no). False for other families: a tied Qwen3 ties by itself (args.tie_embeddings).
bool hf_ties_embeddings(const std::string& family, const std::string& flavor);

// Whether two tensors hold the same dtype, shape and bytes (-0.0 and 0.0 differ; a NaN equals
// the same NaN).
bool same_tensor_bits(const at::Tensor& a, const at::Tensor& b);

}  // namespace titan
