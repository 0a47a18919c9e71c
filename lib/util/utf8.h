// UTF-8 helpers: validation (the tokenizer's, and config values'), the lossy repair every
// reference reader applies, and code point decoding/encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace titan {

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD, one replacement per "maximal subpart"
// (Unicode 15, section 3.9, U+FFFD substitution of maximal subparts). This is what Python's
// bytes.decode("utf-8", "replace"), Rust's String::from_utf8_lossy and JavaScript's TextDecoder
// and Buffer.toString("utf8") all produce, so the text titan tokenizes is the text a Python
// data pipeline (torchtitan) would hand to Hugging Face tokenizers.
std::string repair_utf8(std::string_view s);

// Decodes the code point at s[i] (well-formed input) and advances i past it.
inline uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    const uint32_t c = (uint32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
    i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    const uint32_t c = (uint32_t(b0 & 0x0F) << 12) |
                       (uint32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
                       (static_cast<unsigned char>(s[i + 2]) & 0x3F);
    i += 3;
    return c;
  }
  const uint32_t c = (uint32_t(b0 & 0x07) << 18) |
                     (uint32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
                     (uint32_t(static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
                     (static_cast<unsigned char>(s[i + 3]) & 0x3F);
  i += 4;
  return c;
}

// Byte length of the UTF-8 sequence that starts with `lead` (well-formed input).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Appends the UTF-8 encoding of `c` (a scalar value) to `out`.
void append_utf8(uint32_t c, std::string& out);

}  // namespace titan
