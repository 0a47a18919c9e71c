// Byte-level tokenizer: token id = byte value, plus BOS and EOS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

class ByteTokenizer {
 public:
  static constexpr int64_t kBos = 256;
  static constexpr int64_t kEos = 257;
  static constexpr int64_t kVocabSize = 258;

  // [BOS, bytes..., EOS] (BOS/EOS optional).
  std::vector<int32_t> encode(const std::string& text, bool add_bos = true,
                              bool add_eos = true) const;
  // Special tokens are dropped; ids outside the vocabulary throw std::out_of_range.
  std::string decode(const std::vector<int32_t>& tokens) const;
};

}  // namespace titan
