#include "data/text_encoding.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "config/config.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"

namespace titan {
namespace {

class TokenizerEncoder : public TextEncoder {
 public:
  TokenizerEncoder(std::shared_ptr<const Tokenizer> tokenizer, int64_t id_limit)
      : tokenizer_(std::move(tokenizer)), id_limit_(id_limit) {}
  std::vector<int32_t> encode_document(const std::string& text) const override {
    std::vector<int32_t> ids = tokenizer_->encode_for_training(text, true, true);
    for (const int32_t id : ids) {
      // An id past the vocabulary size the tokenizer reports (a tokenizer.json with gaps).
      if (id_limit_ > 0 && id >= id_limit_) {
        throw ConfigError("model.hf_assets_path",
                          fmt::format("the tokenizer emitted id {}, but the model's vocab_size is "
                                      "{}",
                                      id, id_limit_),
                          "use a flavor whose vocabulary holds every id of the tokenizer");
      }
    }
    return ids;
  }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  std::string describe() const override { return tokenizer_->describe(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t id_limit_;
};

bool reads_text(DatasetKind kind) {
  return kind != DatasetKind::kSynthetic && kind != DatasetKind::kTokens;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string file_hash(const std::string& path) {
  const std::string bytes = read_file(path, kMaxTokenizerFileBytes);
  return fmt::format("{:016x}", hash_bytes(bytes.data(), bytes.size()));
}

// The tokenizer file, and tokenizer_config.json when there is one (it sets BOS/EOS and adds
// tokens), each with a hash of its bytes.
std::string fingerprint_of(const Tokenizer& tokenizer, const std::string& folder) {
  const std::string& file = tokenizer.info().file;
  std::string line = fmt::format("{} {}", file, file_hash(file));
  const std::string& merges = tokenizer.info().merges_file;
  if (!merges.empty()) line += fmt::format(" {} {}", merges, file_hash(merges));
  const std::string config = folder + "/tokenizer_config.json";
  struct stat st {};
  if (::stat(config.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    line += fmt::format(" tokenizer_config.json {}", file_hash(config));
  return line + fmt::format(" vocab {}", tokenizer.vocab_size());
}

}  // namespace

std::shared_ptr<const TextEncoder> tokenizer_encoder(std::shared_ptr<const Tokenizer> tokenizer,
                                                     int64_t id_limit) {
  return std::make_shared<TokenizerEncoder>(std::move(tokenizer), id_limit);
}

TextEncoding text_encoding_for(const Config& config, int64_t model_vocab_size) {
  TextEncoding out;
  out.encoder = byte_encoder();
  const bool text = reads_text(config.training.dataset) ||
                    (config.validation.enable && reads_text(config.validation.dataset));
  const std::string& path = config.model.hf_assets_path;
  if (!text || path.empty()) return out;
  if (path == ModelConfig{}.hf_assets_path && !path_exists(path)) {
    out.notes.push_back(fmt::format(
        "model.hf_assets_path is torchtitan's default {} and there is no such folder: text is "
        "tokenized bytewise (256 bytes, BOS 256, EOS 257)",
        path));
    return out;
  }
  out.tokenizer = load_tokenizer(path);
  if (out.tokenizer->vocab_size() > model_vocab_size) {
    throw ConfigError(
        "model.hf_assets_path",
        fmt::format("the tokenizer in {} has {} tokens, but model.flavor \"{}\" has vocab_size {}",
                    path, out.tokenizer->vocab_size(), config.model.flavor, model_vocab_size),
        "use the flavor the tokenizer was made for (Llama 3's 128,256 tokens: 1B, 8B, 70B, "
        "405B), or the tokenizer of this flavor");
  }
  if (out.tokenizer->largest_id() >= model_vocab_size) {
    throw ConfigError(
        "model.hf_assets_path",
        fmt::format("the tokenizer in {} can emit id {} ({}), but model.flavor \"{}\" has "
                    "vocab_size {}: every id must be below it",
                    path, out.tokenizer->largest_id(), out.tokenizer->info().largest_id_source,
                    config.model.flavor, model_vocab_size),
        "give that token an id below the model's vocab_size, or use a flavor whose vocabulary "
        "holds every id of the tokenizer");
  }
  out.encoder = tokenizer_encoder(out.tokenizer, model_vocab_size);
  out.fingerprint = fingerprint_of(*out.tokenizer, path);
  return out;
}

}  // namespace titan
