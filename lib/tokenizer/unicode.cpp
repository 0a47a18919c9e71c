#include "tokenizer/unicode.h"

#include <algorithm>
#include <iterator>

namespace titan {
namespace {
#include "tokenizer/unicode_tables.inc"

const UnicodeTable& table(std::string_view name) { return *find_unicode_table(name); }
}  // namespace

const UnicodeTable* find_unicode_table(std::string_view name) {
  for (const UnicodeTable& t : kUnicodeTables) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

const UnicodeTable* unicode_tables_begin() { return std::begin(kUnicodeTables); }
const UnicodeTable* unicode_tables_end() { return std::end(kUnicodeTables); }

bool table_contains(const UnicodeTable& t, uint32_t c) {
  const CodePointRange* end = t.ranges + t.count;
  const CodePointRange* it = std::upper_bound(
      t.ranges, end, c, [](uint32_t v, const CodePointRange& r) { return v < r.first; });
  return it != t.ranges && (it - 1)->last >= c;
}

bool is_white_space(uint32_t c) {
  static const UnicodeTable& ws = table("Rust_White_Space");
  return table_contains(ws, c);
}

bool is_rust_word_char(uint32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static const UnicodeTable& word = table("Rust_Word");
  return table_contains(word, c);
}

}  // namespace titan
