// A strict, non-recursive JSON reader over one string: the caller walks the structure it expects
// (expect '{', read a string key, ...) and skips what it does not need.
//
// Nesting is tracked with an explicit stack in skip_value, so no input can exhaust the call
// stack; every malformed input ends in JsonSyntaxError with the 1-based column (byte offset + 1)
// of the offending character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace titan {

// Malformed JSON: what() is "column C: <what is wrong>".
class JsonSyntaxError : public std::runtime_error {
 public:
  JsonSyntaxError(const std::string& what, size_t column);
  size_t column() const { return column_; }

 private:
  size_t column_;
};

class JsonCursor {
 public:
  // Requires: `s` outlives the cursor.
  explicit JsonCursor(const std::string& s) : s_(s) {}

  void skip_ws();
  // The next non-space character, not consumed. Throws at the end of the input.
  char peek();
  // Consumes `c` (after spaces) or throws.
  void expect(char c);
  // True when only spaces remain.
  bool at_end();
  // A string; with `out` null its escapes are checked but nothing is kept. A raw control
  // character (U+0000-U+001F) in it throws, as JSON requires.
  void string(std::string* out);
  // Skips one value of any kind.
  void skip_value();
  // An object: for each member, reads its key and the ':' and calls `member(key)`, which must
  // consume the value. Commas are required between members, and refused after the last.
  void object(const std::function<void(const std::string& key)>& member);
  // A number that is a non-negative integer fitting in 64 bits (no fraction or exponent).
  uint64_t unsigned_integer();
  // Any JSON number, as the nearest double (strtod of its text). Refuses one out of double's
  // range rather than returning infinity.
  double real();
  // Any JSON number, as its text (for a reader that keeps integers apart from fractions).
  std::string number_text();
  // true or false.
  bool boolean();
  // Consumes a null and returns true when the next value is one; otherwise consumes nothing.
  bool null();

  [[noreturn]] void fail(const std::string& what) { throw JsonSyntaxError(what, i_ + 1); }
  // The byte offset of the next character to read.
  size_t offset() const { return i_; }

 private:
  static std::string describe(char c);
  void escape(std::string* out);  // after a backslash
  unsigned hex4();
  unsigned code_point();
  void literal(const char* word);
  void digits();
  void number();
  void scalar();

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace titan
