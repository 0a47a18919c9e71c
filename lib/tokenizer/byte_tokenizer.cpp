#include "tokenizer/byte_tokenizer.h"

#include <stdexcept>

namespace titan {

std::vector<int32_t> ByteTokenizer::encode(const std::string& text, bool add_bos,
                                           bool add_eos) const {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size() + 2);
  if (add_bos) tokens.push_back(kBos);
  for (unsigned char byte : text) tokens.push_back(byte);
  if (add_eos) tokens.push_back(kEos);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string text;
  for (int32_t t : tokens) {
    if (t < 0 || t >= kVocabSize)
      throw std::out_of_range("token id out of range: " + std::to_string(t));
    if (t < 256) text += static_cast<char>(t);
  }
  return text;
}

}  // namespace titan
