// Hugging Face's AddedVocabulary (tokenizer/added_vocabulary.rs): the added and special tokens of
// a tokenizer, how they get ids, and where they are found in text.
//
// Ids: a token already known (added before, or in the model's vocabulary) keeps that id; a new
// one gets the next id after the largest added id, or the model's vocabulary size when that is
// larger — the "id" fields of tokenizer.json's added_tokens are not used, as HF does not use
// them. Adding a known token again replaces its flags.
// Matching: non-normalized tokens are found in the raw text, normalized ones (by their
// normalized form) in the normalized pieces between them; leftmost-longest, non-overlapping;
// single_word tokens only between non-word characters (Rust regex \w), lstrip/rstrip take the
// White_Space next to them. A match that is refused still consumes its text, as in HF.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pipeline_stages.h"

namespace titan {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken& o) const {
    return content == o.content && single_word == o.single_word && lstrip == o.lstrip &&
           rstrip == o.rstrip && normalized == o.normalized && special == o.special;
  }
};

class AddedVocabulary {
 public:
  // Adds `tokens` in order (HF's add_tokens / add_special_tokens; `normalizer` may be null).
  void add_tokens(const std::vector<AddedToken>& tokens, const TokenModel& model,
                  const Normalizer* normalizer);

  int32_t token_to_id(std::string_view token, const TokenModel& model) const;
  // Added contents that the model's vocabulary does not have (HF's vocabulary size counts them).
  size_t count_outside(const TokenModel& model) const;
  bool empty() const { return by_id_.empty(); }
  const std::map<int32_t, AddedToken>& by_id() const { return by_id_; }

  // Splits `text` at the tokens of one kind (`normalized` false: the raw-text tokens; true: the
  // normalized ones): on_text(piece, offset) for text between matches, on_token(id) for a match.
  void split(std::string_view text, bool normalized,
             const std::function<void(std::string_view, size_t)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> next;
      int32_t id = -1;  // a token ends here
    };
    std::vector<Node> nodes{1};
    bool first_byte[256] = {};
    void add(std::string_view pattern, int32_t id);
    // Length of the longest pattern at text[pos], its id in `id`; 0 when none.
    size_t longest(std::string_view text, size_t pos, int32_t& id) const;
  };
  void rebuild();

  std::unordered_map<std::string, int32_t> by_content_;
  std::map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> normalized_form_;
  Trie raw_trie_, normalized_trie_;
  bool has_raw_ = false, has_normalized_ = false;
};

}  // namespace titan
