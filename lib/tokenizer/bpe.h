// Byte-pair encoding as Hugging Face tokenizers' BPE model does it (models/bpe: merge_word and
// Word::merge_all), and as tiktoken does it for a rank file (the same algorithm once each pair of
// tokens whose concatenation is a token counts as a merge ranked by that token).
//
// Merging: repeatedly the adjacent pair with the lowest merge rank is merged, the leftmost first
// among equal ranks, until no pair has a merge. Before merging, each character of the piece
// becomes its token; a character without one becomes its bytes' <0xNN> tokens (byte_fallback,
// when all of them exist), else the unknown token (consecutive ones fused with fuse_unk), else
// it is dropped, all exactly as HF orders them. With ignore_merges a piece that is itself a token
// is that token.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/string_map.h"

namespace titan {

struct BpeConfig {
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // HF's BPE: `vocab` maps token strings to ids, `merges` lists token pairs by rank. Throws
  // ConfigError at `where` for a merge whose tokens or result are not in the vocabulary, or an
  // unk_token missing from it.
  BpeModel(StringIdMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeConfig config, const std::string& where);
  // tiktoken: `ranks` maps byte strings to ranks (the token ids). Every single byte must be
  // there (ConfigError at `where`).
  static BpeModel from_ranks(StringIdMap ranks, const std::string& where);

  // Lets encode_raw take the raw bytes of pieces that a ByteLevel pre-tokenizer maps to
  // characters (maps the vocabulary back to bytes once).
  void enable_byte_level_input();

  // Appends the ids of `piece` (text in the vocabulary's alphabet) to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;
  // The same for ByteLevel(piece) after enable_byte_level_input(), or for the raw bytes of a
  // tiktoken piece.
  void encode_raw(std::string_view raw, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // The token of `id` (for messages and decoding); empty when none.
  std::string id_to_token(int32_t id) const;
  // Entries in the vocabulary (HF's get_vocab_size of the model).
  size_t vocab_size() const { return vocab_.size(); }
  const StringIdMap& vocab() const { return vocab_; }

 private:
  BpeModel() = default;
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
  };
  void merge_all(std::vector<Symbol>& symbols) const;
  void word_from_chars(std::string_view piece, std::vector<Symbol>& symbols) const;
  // The per-thread cache of merged pieces (`raw`: keyed on raw bytes, a separate cache).
  bool cached(std::string_view key, bool raw, std::vector<int32_t>& out) const;
  void remember(std::string_view key, bool raw, const int32_t* ids, size_t n) const;

  StringIdMap vocab_;
  PairMap merges_;
  BpeConfig config_;
  int32_t unk_id_ = -1;
  // Raw-byte input: the vocabulary keyed on bytes, and each byte's own token (-1: none).
  StringIdMap raw_vocab_;
  std::array<int32_t, 256> byte_ids_{};
  bool raw_ready_ = false;
  bool raw_ignore_merges_ = false;
  uint64_t serial_ = 0;  // names this model's per-thread cache
};

// GPT-2's byte-to-character table of the ByteLevel components: byte b is the code point
// byte_level_char(b) (printable bytes map to themselves).
uint32_t byte_level_char(unsigned char b);

}  // namespace titan
