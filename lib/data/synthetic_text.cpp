#include "data/synthetic_text.h"

#include <algorithm>
#include <cmath>

#include "util/hash.h"

namespace titan {
namespace {

constexpr size_t kLexiconSize = 600;
constexpr size_t kSuccessorsPerWord = 6;
const char* const kConsonants = "bcdfghklmnprstvwz";
const char* const kVowels = "aeiou";

double uniform01(uint64_t& state) { return (splitmix64(state) >> 11) * (1.0 / 9007199254740992.0); }

size_t below(uint64_t& state, size_t n) { return static_cast<size_t>(splitmix64(state) % n); }

std::string invent_word(uint64_t& state) {
  size_t syllables = 1 + below(state, 3);
  std::string word;
  for (size_t s = 0; s < syllables; ++s) {
    word += kConsonants[below(state, 17)];
    word += kVowels[below(state, 5)];
    if (below(state, 3) == 0) word += kConsonants[below(state, 17)];
  }
  return word;
}

}  // namespace

SyntheticText::SyntheticText(uint64_t seed) : seed_(seed) {
  uint64_t state = seed ^ 0x5EEDF00Dull;
  while (words_.size() < kLexiconSize) {
    std::string w = invent_word(state);
    if (std::find(words_.begin(), words_.end(), w) == words_.end()) words_.push_back(w);
  }
  double total = 0;
  for (size_t i = 0; i < words_.size(); ++i) {
    total += 1.0 / static_cast<double>(i + 1);
    cumulative_.push_back(total);
  }
  for (auto& c : cumulative_) c /= total;
  successors_.resize(words_.size());
  for (auto& next : successors_) {
    for (size_t j = 0; j < kSuccessorsPerWord; ++j)
      next.push_back(static_cast<uint32_t>(below(state, kLexiconSize)));
  }
}

std::string SyntheticText::document(uint64_t index) const {
  uint64_t state = seed_ * 0x100000001B3ull + index * 0x9E3779B97F4A7C15ull + 1;
  splitmix64(state);
  std::string text;
  size_t sentences = 3 + below(state, 6);
  for (size_t s = 0; s < sentences; ++s) {
    size_t word_count = 4 + below(state, 9);
    size_t word = std::lower_bound(cumulative_.begin(), cumulative_.end(), uniform01(state)) -
                  cumulative_.begin();
    for (size_t w = 0; w < word_count; ++w) {
      std::string token = words_[std::min(word, words_.size() - 1)];
      if (w == 0) token[0] = static_cast<char>(token[0] - 'a' + 'A');
      text += token;
      text += (w + 1 == word_count) ? ". " : " ";
      // Mostly follow the successor set; sometimes jump to a Zipf-drawn word.
      if (below(state, 5) != 0) {
        word = successors_[word][below(state, kSuccessorsPerWord)];
      } else {
        word = std::lower_bound(cumulative_.begin(), cumulative_.end(), uniform01(state)) -
               cumulative_.begin();
      }
    }
  }
  text.pop_back();
  return text;
}

}  // namespace titan
