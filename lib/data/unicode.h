// Unicode 16.0 property tables (generated from Hugging Face tokenizers' regex engine, see
// unicode_tables.inc) and the code point predicates the tokenizer components use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace titan {

struct CodePointRange {
  uint32_t first, last;
};
struct UnicodeTable {
  const char* name;  // "L", "Nd", "Alphabetic", "White_Space", ...
  const CodePointRange* ranges;
  size_t count;
};

// The table named `name`, or null.
const UnicodeTable* find_unicode_table(std::string_view name);
// All tables.
const UnicodeTable* unicode_tables_begin();
const UnicodeTable* unicode_tables_end();

bool table_contains(const UnicodeTable& table, uint32_t c);

// Rust's char::is_whitespace: Unicode White_Space.
bool is_white_space(uint32_t c);
// Rust regex's \w: Alphabetic, marks, decimal numbers, connector punctuation, joiners.
bool is_rust_word_char(uint32_t c);

}  // namespace titan
