#include "checkpoint/hf_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <cmath>
#include <map>
#include <system_error>

#include "checkpoint/hf_llama.h"
#include "util/error.h"
#include "util/files.h"
#include "util/json_cursor.h"
#include "util/strings.h"

namespace titan {
namespace {

constexpr const char* kHint =
    "give the folder of a Hugging Face Llama or Qwen3 checkpoint (config.json beside "
    "model.safetensors "
    "or model.safetensors.index.json)";

// A number that must be a non-negative integer (JSON writers may put 8192.0 for 8192).
int64_t whole_number(JsonCursor& cur, const std::string& key) {
  const double v = cur.real();
  if (!(v >= 0) || v != std::floor(v) || v > 9.0e15) {
    cur.fail(fmt::format("\"{}\" must be a non-negative integer", key));
  }
  return static_cast<int64_t>(v);
}

std::string text_value(JsonCursor& cur, const std::string& key) {
  if (cur.peek() != '"') cur.fail(fmt::format("\"{}\" must be a string", key));
  std::string s;
  cur.string(&s);
  return s;
}

std::vector<std::string> string_list(JsonCursor& cur, const std::string& key) {
  std::vector<std::string> out;
  cur.expect('[');
  if (cur.peek() == ']') {
    cur.expect(']');
    return out;
  }
  while (true) {
    out.push_back(text_value(cur, key));
    if (cur.peek() == ']') break;
    cur.expect(',');
  }
  cur.expect(']');
  return out;
}

// The members of a rope_scaling or rope_parameters object; rope_theta only in the latter. llama3
// scaling needs all four of its parameters (transformers refuses the config otherwise), so none
// is taken from a default.
void parse_rope_object(JsonCursor& cur, HfRopeScaling& s, std::optional<double>* theta) {
  int scaling_fields = 0;
  cur.object([&](const std::string& key) {
    scaling_fields += key == "factor" || key == "low_freq_factor" || key == "high_freq_factor" ||
                      key == "original_max_position_embeddings";
    if (key == "rope_type" || key == "type") {
      s.rope_type = text_value(cur, key);
    } else if (key == "factor") {
      s.factor = cur.real();
    } else if (key == "low_freq_factor") {
      s.low_freq_factor = cur.real();
    } else if (key == "high_freq_factor") {
      s.high_freq_factor = cur.real();
    } else if (key == "original_max_position_embeddings") {
      s.original_max_position_embeddings = static_cast<double>(whole_number(cur, key));
    } else if (key == "rope_theta" && theta) {
      *theta = cur.real();
    } else {
      cur.skip_value();
    }
  });
  if (s.rope_type == "llama3" && scaling_fields < 4) {
    cur.fail(
        "llama3 rope scaling needs factor, low_freq_factor, high_freq_factor and "
        "original_max_position_embeddings");
  }
}

HfConfig parse_fields(const std::string& text, const std::string& path) {
  HfConfig c;
  std::map<std::string, bool> seen;
  std::optional<double> top_theta, nested_theta;
  std::optional<HfRopeScaling> scaling, parameters;
  JsonCursor cur(text);
  cur.object([&](const std::string& key) {
    seen[key] = true;
    const std::map<std::string, int64_t*> integers = {
        {"hidden_size", &c.hidden_size},
        {"intermediate_size", &c.intermediate_size},
        {"num_hidden_layers", &c.num_hidden_layers},
        {"num_attention_heads", &c.num_attention_heads},
        {"num_key_value_heads", &c.num_key_value_heads},
        {"vocab_size", &c.vocab_size},
        {"max_position_embeddings", &c.max_position_embeddings}};
    const std::map<std::string, bool*> flags = {{"tie_word_embeddings", &c.tie_word_embeddings},
                                                {"attention_bias", &c.attention_bias},
                                                {"mlp_bias", &c.mlp_bias},
                                                {"use_sliding_window", &c.use_sliding_window}};
    if (auto it = integers.find(key); it != integers.end()) {
      *it->second = whole_number(cur, key);
    } else if (auto f = flags.find(key); f != flags.end()) {
      *f->second = cur.boolean();
    } else if (key == "head_dim") {
      if (!cur.null()) c.head_dim = whole_number(cur, key);
    } else if (key == "rms_norm_eps") {
      c.rms_norm_eps = cur.real();
    } else if (key == "rope_theta") {
      top_theta = cur.real();
    } else if (key == "rope_scaling" || key == "rope_parameters") {
      if (cur.null()) return;
      HfRopeScaling s;
      s.rope_type = "";
      parse_rope_object(cur, s, key == "rope_parameters" ? &nested_theta : nullptr);
      (key == "rope_scaling" ? scaling : parameters) = s;
    } else if (key == "architectures") {
      c.architectures = string_list(cur, key);
    } else if (key == "model_type" || key == "hidden_act" || key == "torch_dtype") {
      std::string& out = key == "model_type"   ? c.model_type
                         : key == "hidden_act" ? c.hidden_act
                                               : c.torch_dtype;
      out = text_value(cur, key);
    } else {
      cur.skip_value();
    }
  });
  if (!cur.at_end()) cur.fail("trailing characters after the object");
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size"}) {
    if (!seen.count(key)) {
      throw ConfigError(
          path, fmt::format("\"{}\" is missing: not a Llama or Qwen3 config.json", key), kHint);
    }
  }
  if (!seen.count("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  // transformers 4.x: rope_scaling; 5.x: rope_parameters (with rope_theta inside). Either way
  // rope_type "default" (or none given) is plain RoPE.
  std::optional<HfRopeScaling> rope = scaling ? scaling : parameters;
  if (rope && (rope->rope_type.empty() || rope->rope_type == "default")) rope.reset();
  c.rope_scaling = rope;
  if (nested_theta) c.rope_theta = *nested_theta;
  if (top_theta) c.rope_theta = *top_theta;
  return c;
}

std::string number_text(double v) { return fmt::format("{}", v); }

}  // namespace

std::string python_float_repr(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e16) {
    return fmt::format("{:.1f}", value);
  }
  std::string s = fmt::format("{}", value);
  if (std::isfinite(value) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

HfConfig parse_hf_config(const std::string& text, const std::string& path) {
  try {
    return parse_fields(text, path);
  } catch (const JsonSyntaxError& e) {
    throw ConfigError(path, fmt::format("JSON, {}", e.what()), kHint);
  }
}

HfConfig read_hf_config(const std::string& path) {
  std::string text;
  try {
    text = read_file(path, kMaxTextFileBytes);
  } catch (const std::system_error& e) {
    throw ConfigError(path, e.code().message(), kHint);
  }
  return parse_hf_config(text, path);
}

std::vector<std::string> hf_config_mismatches(const HfConfig& c, const ModelArgs& a) {
  std::vector<std::string> out;
  auto integer = [&](const char* hf, int64_t hf_value, const char* titan, int64_t titan_value) {
    if (hf_value != titan_value) {
      out.push_back(fmt::format("{} {} in config.json, {} {} in the model", hf, hf_value, titan,
                                titan_value));
    }
  };
  auto real = [&](const std::string& hf, double hf_value, const std::string& titan,
                  double titan_value) {
    if (hf_value != titan_value) {
      out.push_back(fmt::format("{} {} in config.json, {} {} in the model", hf,
                                number_text(hf_value), titan, number_text(titan_value)));
    }
  };
  const HfFamily& family = hf_family(a);
  if (c.model_type != family.model_type) {
    out.push_back(fmt::format("model_type \"{}\" in config.json, \"{}\" in the model ({})",
                              c.model_type, family.model_type, a.family));
  }
  bool causal_lm = c.architectures.empty();
  for (const auto& arch : c.architectures) causal_lm = causal_lm || arch == family.architecture;
  if (!causal_lm) {
    out.push_back(fmt::format("architectures [{}] in config.json, {} in the model",
                              fmt::join(c.architectures, ", "), family.architecture));
  }
  integer("hidden_size", c.hidden_size, "dim", a.dim);
  integer("num_hidden_layers", c.num_hidden_layers, "n_layers", a.n_layers);
  integer("num_attention_heads", c.num_attention_heads, "n_heads", a.n_heads);
  integer("num_key_value_heads", c.num_key_value_heads, "n_kv_heads", a.kv_heads());
  if (c.head_dim) {
    integer("head_dim", *c.head_dim, a.head_dim_override ? "head_dim" : "dim / n_heads",
            a.head_dim());
  }
  if (a.tie_embeddings && !c.tie_word_embeddings) {
    out.push_back(
        "tie_word_embeddings false in config.json, the model's output is its embedding "
        "(enable_weight_tying)");
  }
  if (c.use_sliding_window) {
    out.push_back(
        "use_sliding_window true in config.json, causal attention over the whole "
        "sequence in the model");
  }
  integer("vocab_size", c.vocab_size, "vocab_size", a.vocab_size);
  integer("intermediate_size", c.intermediate_size, "the FFN hidden dim", a.ffn_hidden_dim());
  real("rms_norm_eps", c.rms_norm_eps, "norm_eps", a.norm_eps);
  real("rope_theta", c.rope_theta, "rope_theta", a.rope_theta);
  const RopeScaling& s = a.rope_scaling;
  if (c.rope_scaling && c.rope_scaling->rope_type != "llama3") {
    out.push_back(
        fmt::format("rope_scaling.rope_type \"{}\" in config.json, the model scales "
                    "as \"llama3\"{}",
                    c.rope_scaling->rope_type, s.enabled ? "" : " or not at all"));
  } else if (c.rope_scaling && !s.enabled) {
    out.push_back("rope_scaling llama3 in config.json, none in the model");
  } else if (!c.rope_scaling && s.enabled) {
    out.push_back(
        fmt::format("rope_scaling none in config.json, llama3 in the model (factor "
                    "{}, low_freq_factor {}, high_freq_factor {}, "
                    "original_max_position_embeddings {})",
                    number_text(s.factor), number_text(s.low_freq_factor),
                    number_text(s.high_freq_factor), number_text(s.original_max_position)));
  } else if (c.rope_scaling) {
    const HfRopeScaling& r = *c.rope_scaling;
    real("rope_scaling.factor", r.factor, "rope_scaling.factor", s.factor);
    real("rope_scaling.low_freq_factor", r.low_freq_factor, "rope_scaling.low_freq_factor",
         s.low_freq_factor);
    real("rope_scaling.high_freq_factor", r.high_freq_factor, "rope_scaling.high_freq_factor",
         s.high_freq_factor);
    real("rope_scaling.original_max_position_embeddings", r.original_max_position_embeddings,
         "rope_scaling.original_max_position", s.original_max_position);
  }
  if (c.hidden_act != "silu") {
    out.push_back(
        fmt::format("hidden_act \"{}\" in config.json, SwiGLU (silu) in the model", c.hidden_act));
  }
  if (c.attention_bias) out.push_back("attention_bias true in config.json, no biases in the model");
  if (c.mlp_bias) out.push_back("mlp_bias true in config.json, no biases in the model");
  return out;
}

void check_hf_config(const HfConfig& config, const ModelArgs& args, const std::string& path) {
  const auto mismatches = hf_config_mismatches(config, args);
  if (mismatches.empty()) return;
  throw ConfigError(
      path,
      fmt::format("does not describe this config's model ({} mismatch{}): {}", mismatches.size(),
                  mismatches.size() == 1 ? "" : "es", fmt::join(mismatches, "; ")),
      "choose the model.flavor that matches the checkpoint, or another checkpoint");
}

std::string hf_dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      throw RuntimeFailure(
          fmt::format("a Hugging Face export is written in float32, bfloat16 or "
                      "float16, not {}",
                      c10::toString(dtype)));
  }
}

HfConfig hf_config_for(const ModelArgs& a, at::ScalarType dtype, bool tie_word_embeddings) {
  HfConfig c;
  const HfFamily& family = hf_family(a);
  c.architectures = {family.architecture};
  c.model_type = family.model_type;
  c.hidden_size = a.dim;
  c.intermediate_size = a.ffn_hidden_dim();
  c.num_hidden_layers = a.n_layers;
  c.num_attention_heads = a.n_heads;
  c.num_key_value_heads = a.kv_heads();
  c.head_dim = a.head_dim();
  c.vocab_size = a.vocab_size;
  c.max_position_embeddings = a.max_seq_len;
  c.rms_norm_eps = a.norm_eps;
  c.rope_theta = a.rope_theta;
  if (a.rope_scaling.enabled) {
    HfRopeScaling s;
    s.factor = a.rope_scaling.factor;
    s.low_freq_factor = a.rope_scaling.low_freq_factor;
    s.high_freq_factor = a.rope_scaling.high_freq_factor;
    s.original_max_position_embeddings = a.rope_scaling.original_max_position;
    c.rope_scaling = s;
  }
  c.tie_word_embeddings = tie_word_embeddings || a.tie_embeddings;
  c.torch_dtype = hf_dtype_name(dtype);
  return c;
}

std::string format_hf_config(const HfConfig& c) {
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  auto whole = [](double v) { return fmt::format("{}", static_cast<int64_t>(v)); };
  std::map<std::string, std::string> keys;  // sorted, as sort_keys=True
  std::string architectures = "[]";
  if (!c.architectures.empty()) {
    architectures = "[";
    for (size_t i = 0; i < c.architectures.size(); ++i) {
      architectures += (i ? ",\n    " : "\n    ") + quoted(c.architectures[i]);
    }
    architectures += "\n  ]";
  }
  keys["architectures"] = architectures;
  keys["attention_bias"] = boolean(c.attention_bias);
  keys["attention_dropout"] = "0.0";
  if (c.head_dim) keys["head_dim"] = std::to_string(*c.head_dim);
  keys["hidden_act"] = quoted(c.hidden_act);
  keys["hidden_size"] = std::to_string(c.hidden_size);
  keys["initializer_range"] = "0.02";
  keys["intermediate_size"] = std::to_string(c.intermediate_size);
  keys["max_position_embeddings"] = std::to_string(c.max_position_embeddings);
  const bool qwen3 = c.model_type == "qwen3";  // Qwen3Config's keys beside LlamaConfig's
  if (!qwen3) keys["mlp_bias"] = boolean(c.mlp_bias);
  if (qwen3) {
    keys["max_window_layers"] = std::to_string(c.num_hidden_layers);
    keys["sliding_window"] = "null";
    keys["use_sliding_window"] = boolean(c.use_sliding_window);
  }
  keys["model_type"] = quoted(c.model_type);
  keys["num_attention_heads"] = std::to_string(c.num_attention_heads);
  keys["num_hidden_layers"] = std::to_string(c.num_hidden_layers);
  keys["num_key_value_heads"] = std::to_string(c.num_key_value_heads);
  if (!qwen3) keys["pretraining_tp"] = "1";
  keys["rms_norm_eps"] = python_float_repr(c.rms_norm_eps);
  keys["rope_scaling"] = "null";
  if (c.rope_scaling) {
    const HfRopeScaling& s = *c.rope_scaling;
    keys["rope_scaling"] = fmt::format(
        "{{\n    \"factor\": {},\n    \"high_freq_factor\": {},\n    \"low_freq_factor\": {},\n"
        "    \"original_max_position_embeddings\": {},\n    \"rope_type\": {}\n  }}",
        python_float_repr(s.factor), python_float_repr(s.high_freq_factor),
        python_float_repr(s.low_freq_factor), whole(s.original_max_position_embeddings),
        quoted(s.rope_type));
  }
  keys["rope_theta"] = python_float_repr(c.rope_theta);
  keys["tie_word_embeddings"] = boolean(c.tie_word_embeddings);
  if (!c.torch_dtype.empty()) keys["torch_dtype"] = quoted(c.torch_dtype);
  keys["use_cache"] = "true";
  keys["vocab_size"] = std::to_string(c.vocab_size);
  std::string out = "{";
  for (const auto& [key, value] : keys) {
    out += (out.size() > 1 ? ",\n  " : "\n  ") + quoted(key) + ": " + value;
  }
  return out + "\n}\n";
}

}  // namespace titan
