// The TokenModel wrappers of the BPE and WordLevel models.
#include <fmt/format.h>

#include "tokenizer/bpe.h"
#include "tokenizer/pipeline_stages.h"
#include "tokenizer/string_map.h"
#include "util/error.h"
#include "util/utf8.h"

namespace titan {
namespace {

class BpeTokenModel : public TokenModel {
 public:
  explicit BpeTokenModel(BpeModel model) : model_(std::move(model)) {}
  void encode(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const override {
    if (byte_level) {
      model_.encode_raw(piece, out);
    } else {
      model_.encode(piece, out);
    }
  }
  int32_t token_to_id(std::string_view token) const override { return model_.token_to_id(token); }
  size_t vocab_size() const override { return model_.vocab_size(); }
  std::string id_to_token(int32_t id) const override { return model_.id_to_token(id); }
  void for_each_token(const std::function<void(std::string_view, int32_t)>& f) const override {
    model_.vocab().for_each(f);
  }
  void enable_byte_level_input() override { model_.enable_byte_level_input(); }

 private:
  BpeModel model_;
};

class WordLevelModel : public TokenModel {
 public:
  WordLevelModel(std::vector<std::pair<std::string, int32_t>> vocab, const std::string& unk,
                 const std::string& where) {
    for (auto& [token, id] : vocab) vocab_.insert(token, id, true);  // the last duplicate wins
    unk_id_ = vocab_.find(unk);
    if (unk_id_ < 0) {
      throw ConfigError(where, fmt::format("the WordLevel vocabulary has no unk_token \"{}\"", unk),
                        "Hugging Face tokenizers fails on the first unknown word without it; add "
                        "it to the vocabulary");
    }
  }
  void encode(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const override {
    std::string mapped;
    if (byte_level) {  // raw bytes standing for their ByteLevel characters
      for (unsigned char b : piece) append_utf8(byte_level_char(b), mapped);
      piece = mapped;
    }
    const int32_t id = vocab_.find(piece);
    out.push_back(id >= 0 ? id : unk_id_);
  }
  int32_t token_to_id(std::string_view token) const override { return vocab_.find(token); }
  size_t vocab_size() const override { return vocab_.size(); }
  std::string id_to_token(int32_t id) const override {
    std::string found;
    vocab_.for_each([&](std::string_view t, int32_t v) {
      if (v == id && found.empty()) found.assign(t);
    });
    return found;
  }
  void for_each_token(const std::function<void(std::string_view, int32_t)>& f) const override {
    vocab_.for_each(f);
  }

 private:
  StringIdMap vocab_;
  int32_t unk_id_ = -1;
};

}  // namespace

std::unique_ptr<TokenModel> make_bpe_model(BpeModel model) {
  return std::make_unique<BpeTokenModel>(std::move(model));
}

std::unique_ptr<TokenModel> make_word_level_model(
    std::vector<std::pair<std::string, int32_t>> vocab, const std::string& unk_token,
    const std::string& where) {
  return std::make_unique<WordLevelModel>(std::move(vocab), unk_token, where);
}

}  // namespace titan
