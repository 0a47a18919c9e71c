// The built-in dataset: English-like text generated deterministically from a seed.
//
// A seeded lexicon of invented words with Zipf-distributed frequencies, and for each word a small
// set of likely successors, produce sentences and paragraphs. Within a word the next byte is
// almost determined by the prefix, and word order follows the successor sets, so a model can get
// well below the unigram byte entropy quickly: loss visibly falls within tens of steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

class SyntheticText {
 public:
  explicit SyntheticText(uint64_t seed);
  // Document `index` (any uint64). The same (seed, index) always gives the same text.
  std::string document(uint64_t index) const;

 private:
  uint64_t seed_;
  std::vector<std::string> words_;
  std::vector<double> cumulative_;                 // Zipf CDF over words_
  std::vector<std::vector<uint32_t>> successors_;  // likely next words for each word
};

}  // namespace titan
