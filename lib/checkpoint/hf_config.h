// A Hugging Face checkpoint's config.json (transformers' LlamaConfig or Qwen3Config), read,
// checked against titan-train's model args, and written.
//
// Read: the fields that decide the shapes and the numerics of LlamaForCausalLM. The rope
// parameters come in either of transformers' spellings: top-level "rope_theta" with a
// "rope_scaling" object (or null), as Meta's Llama 3.x releases and transformers 4.x write
// them, or one "rope_parameters" object holding "rope_theta" too (transformers 5). "type" is
// read as an alias of "rope_type".
//
// Written: the 4.x spelling (which 5.x reads too), keys sorted, two-space indent and floats as
// Python's repr, the form `json.dumps(config, indent=2, sort_keys=True)` gives, so that a file
// written by a Python tool in that form and read back is written again byte for byte. Keys that
// titan-train has no value for (token ids, transformers_version) are not written;
// LlamaConfig's defaults apply to them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model_args.h"

namespace titan {

struct HfRopeScaling {
  std::string rope_type = "llama3";
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;
};

struct HfConfig {
  std::vector<std::string> architectures;  // ["LlamaForCausalLM"]
  std::string model_type = "llama";
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // num_attention_heads when the file leaves it out
  std::optional<int64_t> head_dim;  // hidden_size / num_attention_heads when left out
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;  // LlamaConfig's default
  double rope_theta = 10000.0;
  std::optional<HfRopeScaling> rope_scaling;  // none: plain RoPE
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  bool attention_bias = false;
  bool mlp_bias = false;
  bool use_sliding_window = false;  // Qwen3Config's
  std::string torch_dtype;          // "" when absent
};

// Parses config.json text. Throws ConfigError naming `path` (and the JSON column) for malformed
// JSON, a field of the wrong type, or a required shape field missing.
HfConfig parse_hf_config(const std::string& text, const std::string& path);

// Reads and parses `path`: a regular file of at most kMaxTextFileBytes. Throws FileRefused or
// ConfigError naming the path.
HfConfig read_hf_config(const std::string& path);

// Every way `config` (read from `path`) differs from the model `args` builds, one line each
// naming both sides ("num_key_value_heads 8 in config.json, n_kv_heads 4 in the model"); empty
// when transformers' model and titan-train's compute the same function. max_position_embeddings
// is not compared (titan-train's table is training.seq_len long; llama3 RoPE scaling uses
// original_max_position_embeddings).
std::vector<std::string> hf_config_mismatches(const HfConfig& config, const ModelArgs& args);

// Throws ConfigError whose `where` is `path`, listing every mismatch, when there is one.
void check_hf_config(const HfConfig& config, const ModelArgs& args, const std::string& path);

// The config.json of the model `args` builds, its weights stored in `dtype`, with
// tie_word_embeddings as given (always set for a tied model: args.tie_embeddings). model_type,
// architectures and the keys written follow the family (hf_llama.h's HfFamily).
HfConfig hf_config_for(const ModelArgs& args, at::ScalarType dtype, bool tie_word_embeddings);

// config.json's text (see the top of this file).
std::string format_hf_config(const HfConfig& config);

// "float32", "bfloat16", "float16" (transformers' torch_dtype names). Throws RuntimeFailure for
// another dtype.
std::string hf_dtype_name(at::ScalarType dtype);

// A number as Python's repr of a float writes it ("500000.0", "1e-05").
std::string python_float_repr(double value);

}  // namespace titan
