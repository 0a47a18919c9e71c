// The stages of a Hugging Face tokenizer pipeline as titan runs them (tokenizer/mod.rs:
// added tokens -> normalizer -> pre-tokenizer -> model -> post-processor), reduced to what ids
// depend on: no offsets, no alignments.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace titan {

class BpeModel;

// Rewrites a piece of text in place (HF's normalizers).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Where a pre-tokenizer hands its pieces. `byte_level`: the piece is raw bytes that stand for
// their ByteLevel characters (only the last stage may emit such pieces, for the model's fast
// path). `at_start`: the piece begins at offset 0 of the original text (Metaspace's "first").
using PieceSink = std::function<void(std::string_view piece, bool byte_level, bool at_start)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits `text` and hands each non-empty piece, in order, to `sink`.
  virtual void split(std::string_view text, bool at_start, const PieceSink& sink) const = 0;
  // Called on the last stage when the model can take raw-byte pieces.
  virtual void set_last() {}
};

// The model: a piece to ids.
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual void encode(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const = 0;
  virtual int32_t token_to_id(std::string_view token) const = 0;  // -1: none
  virtual size_t vocab_size() const = 0;                          // entries of the vocabulary
  virtual std::string id_to_token(int32_t id) const = 0;          // empty: none
  virtual void for_each_token(const std::function<void(std::string_view, int32_t)>& f) const = 0;
  virtual void enable_byte_level_input() {}
};

// Adds the special tokens around an encoding (add_special_tokens=true).
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<int32_t> process(std::vector<int32_t> ids) const = 0;
  // The largest id process() adds; -1 when it adds none.
  virtual int32_t largest_added_id() const { return -1; }
};

// The HF models titan supports.
std::unique_ptr<TokenModel> make_bpe_model(BpeModel model);
// WordLevel: a piece is its token, else unk_token. Throws ConfigError at `where` when the
// vocabulary lacks unk_token (HF fails on the first unknown piece; titan refuses at load).
std::unique_ptr<TokenModel> make_word_level_model(
    std::vector<std::pair<std::string, int32_t>> vocab, const std::string& unk_token,
    const std::string& where);

}  // namespace titan
