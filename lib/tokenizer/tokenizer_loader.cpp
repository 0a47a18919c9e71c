// load_tokenizer: torchtitan v0.2.2's file search and special-token inference (see the header).
#include "tokenizer/tokenizer_loader.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tokenizer/bpe.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tiktoken_file.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace titan {
namespace fs = std::filesystem;
namespace {

// os.path.exists: anything there (a link is followed).
bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_text(const std::string& path) {
  try {
    return read_file(path, kMaxTokenizerFileBytes);
  } catch (const std::system_error& e) {
    if (e.code().value() == EFBIG) {
      throw ConfigError(path, fmt::format("larger than {} MiB", kMaxTokenizerFileBytes >> 20),
                        "a tokenizer file this large is not one titan-train reads");
    }
    throw ConfigError(path, e.code().message(), "check that the file is readable");
  }
}

// Python's str.isspace() for one code point: White_Space plus the separators U+001C..U+001F.
bool py_space(uint32_t c) { return (c >= 0x1C && c <= 0x1F) || is_white_space(c); }

// Python's str.strip() (no argument) of well-formed UTF-8.
std::string_view py_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t k = begin;
    if (!py_space(next_code_point(s, k))) break;
    begin = k;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t b = end - 1;
    while (b > begin && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    size_t k = b;
    if (!py_space(next_code_point(s, k))) break;
    end = b;
  }
  return s.substr(begin, end - begin);
}

// The first two fields of Python's str.split() (no argument) of well-formed UTF-8.
std::vector<std::string_view> py_split2(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < s.size() && parts.size() < 2) {
    size_t k = i;
    while (k < s.size()) {  // skip spaces
      size_t next = k;
      if (!py_space(next_code_point(s, next))) break;
      k = next;
    }
    const size_t start = k;
    while (k < s.size()) {
      size_t next = k;
      if (py_space(next_code_point(s, next))) break;
      k = next;
    }
    if (k > start) parts.push_back(s.substr(start, k - start));
    i = k;
  }
  return parts;
}

// The lines of a text file as Python's text mode reads them (universal newlines: \n, \r\n, \r).
std::vector<std::string_view> py_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    while (end < text.size() && text[end] != '\n' && text[end] != '\r') ++end;
    lines.push_back(text.substr(pos, end - pos));
    if (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') {
      ++end;
    }
    pos = end + 1;
  }
  return lines;
}

std::vector<std::pair<std::string, int32_t>> read_vocab(const std::string& json_path,
                                                        const std::string& txt_path,
                                                        std::string& source) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  if (exists(json_path)) {
    source = json_path;
    const Json doc = read_json_file(json_path, kMaxTokenizerFileBytes);
    if (!doc.is_object()) {
      throw ConfigError(json_path, "expected an object of token: id", "check vocab.json");
    }
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > 0x7FFFFFFF) {
        throw ConfigError(json_path + ": " + it.key(), "expected a token id", "check vocab.json");
      }
      vocab.emplace_back(it.key(), static_cast<int32_t>(it.value().get<uint64_t>()));
    }
    return vocab;
  }
  source = txt_path;
  const std::string text = read_text(txt_path);
  if (!is_valid_utf8(text)) {
    throw ConfigError(txt_path, "not UTF-8 text", "vocab.txt is one token per line, in UTF-8");
  }
  int32_t line = 0;
  for (const std::string_view raw : py_lines(text)) {
    const std::string_view token = py_strip(raw);
    if (!token.empty()) vocab.emplace_back(std::string(token), line);
    ++line;
  }
  return vocab;
}

std::unique_ptr<HfTokenizer> load_vocab_files(const std::string& dir, const std::string& merges) {
  std::string source;
  auto vocab = read_vocab(dir + "/vocab.json", dir + "/vocab.txt", source);
  const std::string name = fs::path(source).filename().string();
  TokenizerInfo info;
  info.file = source;
  HfPipeline p;
  if (!exists(merges)) {
    info.kind = name + " (WordLevel)";
    p.model = make_word_level_model(std::move(vocab), "[UNK]", source);
    return std::make_unique<HfTokenizer>(std::move(p), std::move(info));
  }
  const std::string text = read_text(merges);
  if (!is_valid_utf8(text)) throw ConfigError(merges, "not UTF-8 text", "check merges.txt");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string_view raw : py_lines(text)) {
    const std::string_view line = py_strip(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string_view> parts = py_split2(line);
    if (parts.size() >= 2) pairs.emplace_back(std::string(parts[0]), std::string(parts[1]));
  }
  StringIdMap ids;
  for (auto& [token, id] : vocab) ids.insert(token, id, true);
  info.kind = name + "+merges.txt (BPE)";
  info.merges_file = merges;
  p.model = make_bpe_model(BpeModel(std::move(ids), pairs, BpeConfig{}, merges));
  p.pre_tokenizer = make_byte_level_pre_tokenizer(false, true);
  p.decoder = "ByteLevel";
  return std::make_unique<HfTokenizer>(std::move(p), std::move(info));
}

using Config = nlohmann::ordered_json;

const Config& member(const Config& obj, const std::string& key) {
  static const Config null_value;
  if (!obj.is_object()) return null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

// torchtitan's _get_token_from_config.
std::optional<std::string> config_token(const Config& config, const std::string& key,
                                        const std::string& path) {
  const Config& v = member(config, key);
  if (v.is_object()) {
    if (!v.contains("content") || !v["content"].is_string()) {
      throw ConfigError(path + ": " + key, "an object without a \"content\" string",
                        "torchtitan refuses it too (\"Could not parse " + key + " from config\")");
    }
    return v["content"].get<std::string>();
  }
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) {
    throw ConfigError(path + ": " + key, "expected a string or an object with \"content\"",
                      "torchtitan refuses it too");
  }
  return v.get<std::string>();
}

// Python's bool() of a JSON value.
bool truthy(const Config& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return false;
}

void infer_special_tokens(HfTokenizer& t, const std::string& config_path) {
  TokenizerInfo& info = t.mutable_info();
  std::optional<Config> config;
  if (exists(config_path)) config = read_ordered_json_file(config_path, kMaxTextFileBytes);
  if (config && !config->is_object()) {
    throw ConfigError(config_path, "expected a JSON object", "check tokenizer_config.json");
  }
  std::optional<std::string> bos, eos;
  if (config) {
    bos = config_token(*config, "bos_token", config_path);
    eos = config_token(*config, "eos_token", config_path);
    std::vector<AddedToken> tokens;
    auto add = [&](const std::string& content, const Config& spec, std::optional<int32_t> id) {
      if (bos && content == *bos) {
        info.bos_token = content;
        info.bos_id = id ? *id : t.token_to_id(content);
      } else if (eos && content == *eos) {
        info.eos_token = content;
        info.eos_id = id ? *id : t.token_to_id(content);
      }
      AddedToken token;  // AddedToken(content, special=True): not normalized
      token.content = content;
      token.special = true;
      token.normalized = false;
      // AddedToken(content, single_word=.get(False), ..., normalized=.get(True)) from an object.
      if (spec.is_object() &&
          (spec.contains("content") || member(spec, "__type") == Config("AddedToken"))) {
        token.single_word = truthy(member(spec, "single_word"));
        token.lstrip = truthy(member(spec, "lstrip"));
        token.rstrip = truthy(member(spec, "rstrip"));
        token.normalized =
            member(spec, "normalized").is_null() || truthy(member(spec, "normalized"));
      }
      tokens.push_back(token);
    };
    for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token", "sep_token",
                            "cls_token", "mask_token"}) {
      const Config& spec = member(*config, key);
      if (spec.is_null()) continue;
      if (const auto content = config_token(*config, key, config_path)) add(*content, spec, {});
    }
    const Config& decoder = member(*config, "added_tokens_decoder");
    for (auto it = decoder.begin(); decoder.is_object() && it != decoder.end(); ++it) {
      const Config& spec = it.value();
      if (!spec.is_object() || !spec.contains("content") || !spec["content"].is_string()) continue;
      int32_t id = 0;
      try {
        const long long v = std::stoll(it.key());
        if (v < 0 || v > 0x7FFFFFFF) throw std::out_of_range("id");
        id = static_cast<int32_t>(v);
      } catch (const std::exception&) {
        throw ConfigError(config_path + ": added_tokens_decoder." + it.key(),
                          "the key is not a token id", "check tokenizer_config.json");
      }
      add(spec["content"].get<std::string>(), spec, id);
    }
    if (!tokens.empty()) {
      t.add_special_tokens(tokens);
      if (!info.bos_token.empty()) info.bos_id = t.token_to_id(info.bos_token);
      if (!info.eos_token.empty()) info.eos_id = t.token_to_id(info.eos_token);
    }
  }
  for (std::optional<int32_t>* id : {&info.bos_id, &info.eos_id}) {
    if (*id && **id < 0) id->reset();  // token_to_id found nothing: Python's None
  }
  const std::vector<int32_t> empty = t.encode_with_special_tokens("");
  auto holds = [&](std::optional<int32_t> id) {
    return id && std::find(empty.begin(), empty.end(), *id) != empty.end();
  };
  info.hf_adds_bos = holds(info.bos_id);
  info.hf_adds_eos = holds(info.eos_id);
  if (config) {
    const Config& add_bos = member(*config, "add_bos_token");
    const Config& add_eos = member(*config, "add_eos_token");
    if (!add_bos.is_null()) info.default_add_bos = truthy(add_bos);
    if (!add_eos.is_null()) info.default_add_eos = truthy(add_eos);
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode_for_training(std::string_view text, bool add_bos,
                                                    bool add_eos) const {
  std::vector<int32_t> ids = encode_with_special_tokens(text);
  if (add_bos && !info_.hf_adds_bos && info_.bos_id) ids.insert(ids.begin(), *info_.bos_id);
  if (add_eos && !info_.hf_adds_eos && info_.eos_id) ids.push_back(*info_.eos_id);
  return ids;
}

std::string Tokenizer::describe() const {
  auto id = [](const std::optional<int32_t>& v, const std::string& token) {
    return v ? fmt::format("{} ({})", *v, token) : std::string("none");
  };
  return fmt::format(
      "tokenizer: {} from {}{}, vocab size {}, bos {}{}, eos {}{}", info_.kind, info_.file,
      info_.merges_file.empty() ? "" : " + " + info_.merges_file, info_.vocab_size,
      id(info_.bos_id, info_.bos_token), info_.hf_adds_bos ? " (added by the post-processor)" : "",
      id(info_.eos_id, info_.eos_token), info_.hf_adds_eos ? " (added by the post-processor)" : "");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& assets_path) {
  struct stat st {};
  if (::stat(assets_path.c_str(), &st) != 0) {
    const bool old_layout = assets_path.find("assets/tokenizer") != std::string::npos;
    throw ConfigError("model.hf_assets_path",
                      fmt::format("{}: {}", assets_path, std::strerror(errno)),
                      old_layout ? "./assets/tokenizer was deprecated by torchtitan; download the "
                                   "model's tokenizer files to model.hf_assets_path"
                                 : "point model.hf_assets_path at the folder of tokenizer.json");
  }
  const std::string dir = assets_path;
  const std::string json_path = dir + "/tokenizer.json";
  std::unique_ptr<HfTokenizer> hf;
  if (exists(json_path)) {
    const Json doc = read_json_file(json_path, kMaxTokenizerFileBytes);
    HfPipeline p = pipeline_from_tokenizer_json(doc, json_path);
    TokenizerInfo info;
    info.kind = "tokenizer.json";
    info.file = json_path;
    hf = std::make_unique<HfTokenizer>(std::move(p), std::move(info));
  } else if (exists(dir + "/vocab.json") || exists(dir + "/vocab.txt")) {
    hf = load_vocab_files(dir, dir + "/merges.txt");
  } else {
    for (const std::string& rank_file :
         {dir + "/original/tokenizer.model", dir + "/tokenizer.model"}) {
      if (exists(rank_file)) return load_tiktoken_file(rank_file, true);
    }
    std::string listing;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec))
        listing += (listing.empty() ? "" : ", ") + it->path().filename().string();
    }
    throw ConfigError(
        "model.hf_assets_path",
        fmt::format("no tokenizer file in {} (files: {})", dir, listing.empty() ? "none" : listing),
        "looking for tokenizer.json, vocab.json or vocab.txt (+ merges.txt), or "
        "Llama 3's original/tokenizer.model");
  }
  infer_special_tokens(*hf, dir + "/tokenizer_config.json");
  return hf;
}

}  // namespace titan
