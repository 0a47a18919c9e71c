#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "util/utf8.h"

namespace titan {
namespace {

// The code point that ends text[0, end) (well-formed UTF-8, end > 0).
uint32_t last_code_point(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return next_code_point(text, i);
}

}  // namespace

void AddedVocabulary::Trie::add(std::string_view pattern, int32_t id) {
  int32_t node = 0;
  for (unsigned char b : pattern) {
    int32_t child = -1;
    for (const auto& [byte, index] : nodes[node].next) {
      if (byte == b) child = index;
    }
    if (child < 0) {
      child = static_cast<int32_t>(nodes.size());
      nodes[node].next.emplace_back(b, child);
      nodes.emplace_back();
    }
    node = child;
  }
  nodes[node].id = id;
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
}

size_t AddedVocabulary::Trie::longest(std::string_view text, size_t pos, int32_t& id) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    int32_t child = -1;
    const unsigned char b = static_cast<unsigned char>(text[i]);
    for (const auto& [byte, index] : nodes[node].next) {
      if (byte == b) {
        child = index;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (nodes[node].id >= 0) {
      best = i + 1 - pos;
      id = nodes[node].id;
    }
  }
  return best;
}

int32_t AddedVocabulary::token_to_id(std::string_view token, const TokenModel& model) const {
  const auto it = by_content_.find(std::string(token));
  return it != by_content_.end() ? it->second : model.token_to_id(token);
}

size_t AddedVocabulary::count_outside(const TokenModel& model) const {
  size_t n = 0;
  for (const auto& [content, id] : by_content_) n += model.token_to_id(content) < 0;
  return n;
}

void AddedVocabulary::add_tokens(const std::vector<AddedToken>& tokens, const TokenModel& model,
                                 const Normalizer* normalizer) {
  // The next new id, fixed before the first token is added (HF computes it once per call).
  const int32_t vocab = static_cast<int32_t>(model.vocab_size());
  int32_t next_id = vocab;
  if (!by_id_.empty()) {
    const int32_t max = by_id_.rbegin()->first;
    next_id = (max >= vocab || vocab == 0) ? max + 1 : vocab;
  }
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    const auto known = by_content_.find(token.content);
    if (known != by_content_.end()) {
      const auto same = by_id_.find(known->second);
      if (same != by_id_.end() && same->second == token) continue;
    }
    int32_t id = token_to_id(token.content, model);
    if (id < 0) id = next_id++;
    if (token.normalized && normalizer != nullptr) {
      std::string normed = token.content;
      normalizer->normalize(normed);
      if (normed != token.content) normalized_form_[id] = normed;
    }
    by_content_[token.content] = id;
    by_id_[id] = token;
  }
  rebuild();
}

void AddedVocabulary::rebuild() {
  raw_trie_ = Trie{};
  normalized_trie_ = Trie{};
  has_raw_ = has_normalized_ = false;
  for (const auto& [id, token] : by_id_) {
    if (token.normalized) {
      const auto it = normalized_form_.find(id);
      const std::string& pattern = it != normalized_form_.end() ? it->second : token.content;
      if (pattern.empty()) continue;
      normalized_trie_.add(pattern, id);
      has_normalized_ = true;
    } else {
      raw_trie_.add(token.content, id);
      has_raw_ = true;
    }
  }
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            const std::function<void(std::string_view, size_t)>& on_text,
                            const std::function<void(int32_t)>& on_token) const {
  const Trie& trie = normalized ? normalized_trie_ : raw_trie_;
  if (!(normalized ? has_normalized_ : has_raw_) || text.empty()) {
    if (!text.empty()) on_text(text, 0);
    return;
  }
  size_t done = 0;  // end of the last accepted match
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t id = -1;
    const size_t len = trie.longest(text, pos, id);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // a refused match still consumes its text
    const AddedToken& token = by_id_.at(id);
    if (token.single_word) {
      const bool start_ok = start == 0 || !is_rust_word_char(last_code_point(text, start));
      size_t k = stop;
      const bool stop_ok = stop == text.size() || !is_rust_word_char(next_code_point(text, k));
      if (!start_ok || !stop_ok) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0 && is_white_space(last_code_point(text, s))) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        s = b;
      }
      start = std::max(s, done);
    }
    if (token.rstrip) {
      size_t k = stop;
      while (k < text.size()) {
        size_t next = k;
        if (!is_white_space(next_code_point(text, next))) break;
        k = next;
      }
      stop = k;  // HF's search goes on from the token's own end, not from here
    }
    if (done < start) on_text(text.substr(done, start - done), done);
    on_token(id);
    done = stop;
  }
  if (done < text.size()) on_text(text.substr(done), done);
}

}  // namespace titan
