#include "tokenizer/tokenizer_json.h"

#include <fmt/format.h>

#include <cerrno>
#include <system_error>
#include <utility>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/json_document.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_loader.h"
#include "util/error.h"
#include "util/files.h"
#include "util/json_cursor.h"

namespace titan {
namespace {

// 1-based line and column of byte `offset` of `text`.
std::string line_column(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("{}:{}", line, column);
}

// Refuses nesting deeper than the bound before the parser sees the text (no recursion, no
// stack to exhaust, whatever the input).
void check_depth(const std::string& text, const std::string& path) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxTokenizerJsonDepth) {
        throw ConfigError(fmt::format("{}:{}", path, line_column(text, i)),
                          fmt::format("JSON nested deeper than {} levels", kMaxTokenizerJsonDepth),
                          "a tokenizer file is a few levels deep; this one is damaged or hostile");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

int32_t id_value(const Json& v, const std::string& where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 0x7FFFFFFF) {
    throw ConfigError(where, "expected a token id (an integer from 0 to 2^31-1)",
                      "check the tokenizer file");
  }
  return static_cast<int32_t>(v.get<uint64_t>());
}

std::unique_ptr<TokenModel> make_model(const Json& spec, const std::string& where) {
  if (!spec.is_object()) {
    throw ConfigError(where, "the tokenizer has no model", "check the tokenizer file");
  }
  std::string type = spec.contains("type") ? json_type(spec, where) : "";
  if (type.empty() && spec.contains("merges")) type = "BPE";  // HF's untagged fallback
  const Json& vocab = json_member(spec, "vocab");
  if (type == "BPE" || type == "WordLevel") {
    if (!vocab.is_object()) {
      throw ConfigError(json_where(where, "vocab"), "expected an object of token: id",
                        "check the tokenizer file");
    }
  }
  if (type == "WordLevel") {
    std::vector<std::pair<std::string, int32_t>> entries;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      entries.emplace_back(it.key(), id_value(it.value(), json_where(where, "vocab")));
    }
    return make_word_level_model(std::move(entries), json_string(spec, "unk_token", where), where);
  }
  if (type != "BPE") unsupported_component("model", type.empty() ? "(untyped)" : type, where);
  const Json& dropout = json_member(spec, "dropout");
  if (!dropout.is_null() && (!dropout.is_number() || dropout.get<double>() != 0.0)) {
    throw ConfigError(json_where(where, "dropout"), "BPE dropout is random at encode time",
                      "titan-train tokenizes deterministically; set dropout to null");
  }
  StringIdMap ids;
  ids.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    ids.insert(it.key(), id_value(it.value(), json_where(where, "vocab")), true);
  }
  const Json& merges_json = json_member(spec, "merges");
  if (!merges_json.is_array()) {
    throw ConfigError(json_where(where, "merges"), "expected a list of merges",
                      "check the tokenizer file");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const Json& m = merges_json[i];
    const std::string mwhere = fmt::format("{}.merges[{}]", where, i);
    if (m.is_string()) {  // legacy "a b": exactly one space
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        throw ConfigError(mwhere,
                          fmt::format("merge \"{}\" is not two tokens separated by one space", s),
                          "check the tokenizer file");
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw ConfigError(mwhere, "a merge is \"a b\" or [\"a\", \"b\"]", "check the tokenizer file");
    }
  }
  BpeConfig config;
  config.unk_token = json_optional_string(spec, "unk_token", where);
  config.continuing_subword_prefix = json_optional_string(spec, "continuing_subword_prefix", where);
  config.end_of_word_suffix = json_optional_string(spec, "end_of_word_suffix", where);
  config.fuse_unk = json_bool(spec, "fuse_unk", false, where);
  config.byte_fallback = json_bool(spec, "byte_fallback", false, where);
  config.ignore_merges = json_bool(spec, "ignore_merges", false, where);
  return make_bpe_model(BpeModel(std::move(ids), merges, std::move(config), where));
}

}  // namespace

namespace {

// The bounded, depth-checked text of a JSON file.
std::string read_json_text(const std::string& path, uint64_t max_bytes) {
  std::string text;
  try {
    text = read_file(path, max_bytes);
  } catch (const std::system_error& e) {
    if (e.code().value() == EFBIG) {
      throw ConfigError(path, fmt::format("larger than {} MiB", max_bytes >> 20),
                        "a tokenizer file this large is not one titan-train reads");
    }
    throw ConfigError(path, e.code().message(), "check that the file is readable");
  }
  check_depth(text, path);
  return text;
}

template <typename J>
J parse_json(const std::string& text, const std::string& path) {
  try {
    return parse_json_document<J>(text);
  } catch (const JsonSyntaxError& e) {
    std::string what = e.what();
    const size_t colon = what.find(": ");  // the reason, after "column C"
    what = colon == std::string::npos ? what : what.substr(colon + 2);
    throw ConfigError(fmt::format("{}:{}", path, line_column(text, e.column() - 1)),
                      "malformed JSON (" + what + ")", "the file must be valid JSON in UTF-8");
  }
}

}  // namespace

Json read_json_file(const std::string& path, uint64_t max_bytes) {
  return parse_json<Json>(read_json_text(path, max_bytes), path);
}

nlohmann::ordered_json read_ordered_json_file(const std::string& path, uint64_t max_bytes) {
  return parse_json<nlohmann::ordered_json>(read_json_text(path, max_bytes), path);
}

HfPipeline pipeline_from_tokenizer_json(const Json& doc, const std::string& path) {
  if (!doc.is_object()) {
    throw ConfigError(path, "expected a JSON object", "is this a Hugging Face tokenizer.json?");
  }
  const Json& version = json_member(doc, "version");
  if (!version.is_null() && (!version.is_string() || version.get<std::string>() != "1.0")) {
    throw ConfigError(path + ": version", "unknown tokenizer.json version (HF reads \"1.0\")",
                      "save the tokenizer with a current tokenizers library");
  }
  for (const char* key : {"truncation", "padding"}) {
    if (!json_member(doc, key).is_null()) {
      unsupported_component(key, "(set)", path + ": " + key);
    }
  }
  HfPipeline p;
  p.model = make_model(json_member(doc, "model"), path + ": model");
  const Json& normalizer = json_member(doc, "normalizer");
  if (!normalizer.is_null()) p.normalizer = make_normalizer(normalizer, path + ": normalizer");
  const Json& pre = json_member(doc, "pre_tokenizer");
  if (!pre.is_null()) p.pre_tokenizer = make_pre_tokenizer(pre, path + ": pre_tokenizer");
  const Json& post = json_member(doc, "post_processor");
  if (!post.is_null()) p.post_processor = make_post_processor(post, path + ": post_processor");
  const Json& decoder = json_member(doc, "decoder");
  if (!decoder.is_null()) p.decoder = json_type(decoder, path + ": decoder");

  const Json& added = json_member(doc, "added_tokens");
  std::vector<AddedToken> tokens;
  if (!added.is_null() && !added.is_array()) {
    throw ConfigError(path + ": added_tokens", "expected a list", "check the tokenizer file");
  }
  for (size_t i = 0; added.is_array() && i < added.size(); ++i) {
    const std::string where = fmt::format("{}: added_tokens[{}]", path, i);
    const Json& t = added[i];
    AddedToken token;
    token.content = json_string(t, "content", where);
    token.single_word = json_bool(t, "single_word", false, where);
    token.lstrip = json_bool(t, "lstrip", false, where);
    token.rstrip = json_bool(t, "rstrip", false, where);
    token.normalized = json_bool(t, "normalized", true, where);
    token.special = json_bool(t, "special", false, where);
    tokens.push_back(std::move(token));
  }
  p.added.add_tokens(tokens, *p.model, p.normalizer.get());
  return p;
}

}  // namespace titan
