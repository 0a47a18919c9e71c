#include "data/sources.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "data/c4_source.h"
#include "data/data_files.h"
#include "data/synthetic_text.h"
#include "tokenizer/byte_tokenizer.h"
#include "util/error.h"
#include "util/files.h"
#include "util/memory_limit.h"

namespace titan {
namespace fs = std::filesystem;
namespace {

constexpr int32_t kLlmcMagicU16 = 20240520;  // llm.c GPT-2 shards
constexpr int32_t kLlmcMagicU32 = 20240801;  // llm.c Llama 3 shards
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

class SyntheticSource : public TokenSource {
 public:
  explicit SyntheticSource(uint64_t seed) : text_(seed), seed_(seed) {}
  uint64_t num_documents() const override { return 0; }
  std::vector<int32_t> document(uint64_t index) const override {
    return tokenizer_.encode(text_.document(index));
  }
  std::string describe() const override {
    return fmt::format("synthetic text (built in, seed {})", seed_);
  }

 private:
  SyntheticText text_;
  ByteTokenizer tokenizer_;
  uint64_t seed_;
};

class ByteEncoder : public TextEncoder {
 public:
  std::vector<int32_t> encode_document(const std::string& text) const override {
    return tokenizer_.encode(text);
  }
  int64_t vocab_size() const override { return ByteTokenizer::kVocabSize; }
  std::string describe() const override { return "tokenized bytewise"; }

 private:
  ByteTokenizer tokenizer_;
};

class TextDocumentSource : public TokenSource {
 public:
  TextDocumentSource(std::vector<std::string> docs, std::string what,
                     std::shared_ptr<const TextEncoder> encoder)
      : docs_(std::move(docs)), what_(std::move(what)), encoder_(std::move(encoder)) {}
  uint64_t num_documents() const override { return docs_.size(); }
  std::vector<int32_t> document(uint64_t index) const override {
    return encoder_->encode_document(docs_.at(index));
  }
  std::string describe() const override {
    return fmt::format("{} ({} documents), {}", what_, docs_.size(), encoder_->describe());
  }

 private:
  std::vector<std::string> docs_;
  std::string what_;
  std::shared_ptr<const TextEncoder> encoder_;
};

std::vector<std::string> split_paragraphs(const std::string& text) {
  std::vector<std::string> docs;
  std::string current;
  std::istringstream lines(text);
  std::string line;
  auto flush = [&] {
    if (!current.empty()) docs.push_back(current);
    current.clear();
  };
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
    } else {
      current += current.empty() ? line : "\n" + line;
    }
  }
  flush();
  return docs;
}

std::unique_ptr<TokenSource> make_text_source(const DatasetSpec& spec,
                                              std::shared_ptr<const TextEncoder> encoder) {
  const std::string& path = spec.path;
  std::vector<std::string> docs;
  for (auto& file : list_data_files(path, {".txt"}, spec.section + ".dataset_path")) {
    for (auto& d : split_paragraphs(read_text_file(file))) docs.push_back(std::move(d));
  }
  if (docs.empty())
    data_error(path, "no text found", "the text dataset needs non-empty .txt files");
  return std::make_unique<TextDocumentSource>(std::move(docs), "text " + path, std::move(encoder));
}

std::unique_ptr<TokenSource> make_jsonl_source(const DatasetSpec& spec,
                                               std::shared_ptr<const TextEncoder> encoder) {
  const std::string& path = spec.path;
  std::vector<std::string> docs;
  for (auto& file : list_data_files(path, {".jsonl"}, spec.section + ".dataset_path")) {
    std::istringstream lines(read_text_file(file));
    std::string line;
    for (size_t number = 1; std::getline(lines, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        std::string text = json_text_field(line);
        if (!text.empty()) docs.push_back(std::move(text));
      } catch (const JsonSyntaxError& e) {
        // what() starts with "column C: "; the location goes in front as file:line:col.
        std::string what = e.what();
        data_error(fmt::format("{}:{}:{}", file, number, e.column()),
                   what.substr(what.find(": ") + 2),
                   "each line must be one JSON object with a string \"text\" field");
      }
    }
  }
  if (docs.empty()) data_error(path, "no documents found", "lines look like {\"text\": \"...\"}");
  return std::make_unique<TextDocumentSource>(std::move(docs), "jsonl " + path, std::move(encoder));
}

// Pre-tokenized shards, read fully into memory as int32.
class TokenShardSource : public TokenSource {
 public:
  TokenShardSource(std::vector<int32_t> tokens, int64_t window, std::string what)
      : tokens_(std::move(tokens)), window_(window), what_(std::move(what)) {}
  uint64_t num_documents() const override { return tokens_.size() / window_; }
  std::vector<int32_t> document(uint64_t index) const override {
    auto begin = tokens_.begin() + static_cast<int64_t>(index) * window_;
    return std::vector<int32_t>(begin, begin + window_);
  }
  std::string describe() const override {
    return fmt::format("{} ({} tokens, {} windows)", what_, tokens_.size(), num_documents());
  }

 private:
  std::vector<int32_t> tokens_;
  int64_t window_;
  std::string what_;
};

// Appends the shard's ids, refusing the first one outside [0, vocab_size) while still unsigned:
// a uint32 id >= 2^31 would otherwise turn negative in int32 and slip past a range check.
template <class T>
void append_tokens(const std::string& file, const std::string& bytes, size_t offset,
                   int64_t vocab_size, std::vector<int32_t>& out) {
  size_t count = (bytes.size() - offset) / sizeof(T);
  out.reserve(out.size() + count);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + offset + i * sizeof(T), sizeof(T));
    if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(vocab_size)) {
      data_error(file,
                 fmt::format("token id {} at position {} is outside the model vocabulary ({})",
                             static_cast<uint64_t>(v), i, vocab_size),
                 "pick a model flavor whose vocab_size covers the tokenizer that wrote the shards");
    }
    out.push_back(static_cast<int32_t>(v));
  }
}

void read_shard(const std::string& file, TokenDtype default_dtype, int64_t vocab_size,
                std::vector<int32_t>& out) {
  std::string bytes = read_data_file(file);
  int32_t header[3] = {0, 0, 0};
  if (bytes.size() >= kLlmcHeaderBytes) std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] == kLlmcMagicU16 || header[0] == kLlmcMagicU32) {
    size_t width = header[0] == kLlmcMagicU16 ? 2 : 4;
    size_t expected = kLlmcHeaderBytes + static_cast<size_t>(header[2]) * width;
    if (header[2] < 0 || bytes.size() != expected) {
      data_error(file, fmt::format("llm.c header says {} tokens, file has {} bytes", header[2],
                                   bytes.size()));
    }
    width == 2 ? append_tokens<uint16_t>(file, bytes, kLlmcHeaderBytes, vocab_size, out)
               : append_tokens<uint32_t>(file, bytes, kLlmcHeaderBytes, vocab_size, out);
    return;
  }
  size_t width = 0;
  switch (default_dtype) {
    case TokenDtype::kUint16:
      width = 2;
      break;
    case TokenDtype::kUint32:
      width = 4;
      break;
  }
  if (bytes.size() % width != 0) {
    data_error(file,
               fmt::format("size {} is not a multiple of {} bytes ({})", bytes.size(), width,
                           to_string(default_dtype)),
               "check training.dataset_token_dtype");
  }
  width == 2 ? append_tokens<uint16_t>(file, bytes, 0, vocab_size, out)
             : append_tokens<uint32_t>(file, bytes, 0, vocab_size, out);
}

std::unique_ptr<TokenSource> make_shard_source(const DatasetSpec& spec, int64_t window,
                                               int64_t vocab_size) {
  std::vector<int32_t> tokens;
  auto files = list_data_files(spec.path, {".bin"}, spec.section + ".dataset_path");
  for (auto& file : files) read_shard(file, spec.token_dtype, vocab_size, tokens);
  if (tokens.size() < static_cast<size_t>(window)) {
    data_error(spec.path, fmt::format("{} tokens is less than one window of {} (seq_len + 1)",
                                      tokens.size(), window));
  }
  return std::make_unique<TokenShardSource>(
      std::move(tokens), window, fmt::format("tokens {} ({} shards)", spec.path, files.size()));
}

}  // namespace

std::shared_ptr<const TextEncoder> byte_encoder() {
  static const auto encoder = std::make_shared<ByteEncoder>();
  return encoder;
}

DatasetSpec training_dataset(const TrainingConfig& t) {
  return DatasetSpec{t.dataset, t.dataset_path, t.dataset_token_dtype, "training"};
}

DatasetSpec validation_dataset(const ValidationConfig& v, TokenDtype token_dtype) {
  return DatasetSpec{v.dataset, v.dataset_path, token_dtype, "validation"};
}

std::unique_ptr<TokenSource> make_token_source(const DatasetSpec& spec, uint64_t seed,
                                               int64_t window, int64_t vocab_size,
                                               std::shared_ptr<const TextEncoder> encoder) {
  if (spec.kind == DatasetKind::kSynthetic || !encoder) encoder = byte_encoder();
  if (spec.kind != DatasetKind::kTokens && vocab_size < encoder->vocab_size()) {
    throw ConfigError("model.flavor",
                      fmt::format("the model's vocab_size {} is smaller than the vocabulary of "
                                  "the text's encoder ({}: {})",
                                  vocab_size, encoder->describe(), encoder->vocab_size()),
                      "pick a flavor with a larger vocabulary (debugmodel has 2048)");
  }
  switch (spec.kind) {
    case DatasetKind::kSynthetic:
      return std::make_unique<SyntheticSource>(seed);
    case DatasetKind::kText:
      return make_text_source(spec, encoder);
    case DatasetKind::kJsonl:
      return make_jsonl_source(spec, encoder);
    case DatasetKind::kC4:
    case DatasetKind::kC4Test:
    case DatasetKind::kC4Validation:
      return make_c4_source(spec.kind, spec.path, spec.section + ".dataset_path", encoder);
    case DatasetKind::kTokens:
      return make_shard_source(spec, window, vocab_size);
  }
  throw std::logic_error("unhandled DatasetKind");
}

}  // namespace titan
