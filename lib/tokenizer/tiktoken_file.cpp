#include "tokenizer/tiktoken_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/regex.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace titan {

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Standard base64 with padding; false for anything else.
bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  uint32_t buffer = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=' && i + 2 >= in.size()) {
      ++padding;
      v = 0;
    } else {
      return false;
    }
    if (padding > 0 && c != '=') return false;
    buffer = (buffer << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  out.resize(out.size() - padding);
  return true;
}

std::vector<std::string> llama3_special_tokens() {
  std::vector<std::string> t = {"<|begin_of_text|>",
                                "<|end_of_text|>",
                                "<|reserved_special_token_0|>",
                                "<|reserved_special_token_1|>",
                                "<|reserved_special_token_2|>",
                                "<|reserved_special_token_3|>",
                                "<|start_header_id|>",
                                "<|end_header_id|>",
                                "<|reserved_special_token_4|>",
                                "<|eot_id|>"};
  for (int i = 5; i < 256 - 5; ++i) t.push_back(fmt::format("<|reserved_special_token_{}|>", i));
  return t;
}

class TiktokenTokenizer : public Tokenizer {
 public:
  TiktokenTokenizer(BpeModel model, std::vector<std::string> specials, TokenizerInfo info)
      : model_(std::move(model)),
        regex_(kLlama3Pattern, info.file),
        specials_(std::move(specials)) {
    info_ = std::move(info);
    model_.vocab().for_each([&](std::string_view token, int32_t rank) {
      if (rank >= static_cast<int32_t>(by_rank_.size())) by_rank_.resize(rank + 1);
      by_rank_[rank].assign(token);
    });
    base_ = static_cast<int32_t>(model_.vocab_size());
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    std::string repaired;
    if (!is_valid_utf8(text)) {
      repaired = repair_utf8(text);
      text = repaired;
    }
    regex_.find_all(text, [&](size_t start, size_t end) {
      model_.encode_raw(text.substr(start, end - start), out);
    });
    return out;
  }
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const override {
    return encode(text);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      if (id >= base_ && id - base_ < static_cast<int32_t>(specials_.size())) {
        bytes += specials_[id - base_];
      } else if (id >= 0 && id < static_cast<int32_t>(by_rank_.size())) {
        bytes += by_rank_[id];
      }
    }
    return repair_utf8(bytes);
  }

 private:
  BpeModel model_;
  Regex regex_;
  std::vector<std::string> specials_;
  std::vector<std::string> by_rank_;
  int32_t base_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken_file(const std::string& path, bool with_llama3_specials) {
  std::string text;
  try {
    text = read_file(path, kMaxTokenizerFileBytes);
  } catch (const std::system_error& e) {
    if (e.code().value() == EFBIG) {
      throw ConfigError(path, fmt::format("larger than {} MiB", kMaxTokenizerFileBytes >> 20),
                        "a rank file this large is not one titan-train reads");
    }
    throw ConfigError(path, e.code().message(), "check that the file is readable");
  }
  StringIdMap ranks;
  std::string token;
  int64_t largest_rank = -1;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    uint64_t rank = 0;
    bool ok = space != std::string_view::npos && space + 1 < line.size() &&
              decode_base64(line.substr(0, space), token);
    for (size_t i = space + 1; ok && i < line.size(); ++i) {
      ok = line[i] >= '0' && line[i] <= '9' && rank < 0x7FFFFFFF / 10;
      rank = rank * 10 + uint64_t(line[i] - '0');
    }
    if (!ok || rank > 0x7FFFFFFF) {
      throw ConfigError(fmt::format("{}:{}", path, line_no),
                        "not a tiktoken rank line (\"<base64 token> <rank>\")",
                        "tokenizer.model must be Meta's Llama 3 tiktoken file; a SentencePiece "
                        "model (Llama 2) is not supported");
    }
    largest_rank = std::max(largest_rank, static_cast<int64_t>(rank));
    if (!ranks.insert(token, static_cast<int32_t>(rank), false)) {
      throw ConfigError(fmt::format("{}:{}", path, line_no), "a token listed twice",
                        "the rank file is damaged");
    }
  }
  const size_t count = ranks.size();
  BpeModel model = BpeModel::from_ranks(std::move(ranks), path);
  std::vector<std::string> specials;
  if (with_llama3_specials) specials = llama3_special_tokens();
  TokenizerInfo info;
  info.kind = with_llama3_specials ? "tiktoken rank file (Llama 3)" : "tiktoken rank file";
  info.file = path;
  info.vocab_size = static_cast<int64_t>(count + specials.size());
  // The specials follow the ranks' count (TiktokenTokenizer's base_), whatever the ranks are.
  info.largest_id = static_cast<int32_t>(largest_rank);
  info.largest_id_source = "a rank of the rank file";
  if (!specials.empty() && static_cast<int64_t>(count + specials.size() - 1) > largest_rank) {
    info.largest_id = static_cast<int32_t>(count + specials.size() - 1);
    info.largest_id_source = fmt::format("special token {:?}", specials.back());
  }
  if (with_llama3_specials) {
    info.bos_id = static_cast<int32_t>(count);
    info.eos_id = static_cast<int32_t>(count + 1);
    info.bos_token = specials[0];
    info.eos_token = specials[1];
  }
  return std::make_unique<TiktokenTokenizer>(std::move(model), std::move(specials),
                                             std::move(info));
}

}  // namespace titan
