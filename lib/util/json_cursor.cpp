#include "util/json_cursor.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/strings.h"
#include "util/utf8.h"

namespace titan {
namespace {

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

unsigned hex_value(char c) {
  if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
  return static_cast<unsigned>(c - 'A' + 10);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

JsonSyntaxError::JsonSyntaxError(const std::string& what, size_t column)
    : std::runtime_error("column " + std::to_string(column) + ": " + what), column_(column) {}

void JsonCursor::skip_ws() {
  while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n'))
    ++i_;
}

char JsonCursor::peek() {
  skip_ws();
  if (i_ >= s_.size()) fail("unexpected end of line");
  return s_[i_];
}

void JsonCursor::expect(char c) {
  if (peek() != c) fail(std::string("expected '") + c + "', found " + describe(s_[i_]));
  ++i_;
}

bool JsonCursor::at_end() {
  skip_ws();
  return i_ >= s_.size();
}

// A string; with `out` null its escapes are checked but nothing is kept.
void JsonCursor::string(std::string* out) {
  expect('"');
  while (true) {
    size_t run = i_;
    while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\' &&
           static_cast<unsigned char>(s_[i_]) >= 0x20)
      ++i_;
    if (out) out->append(s_, run, i_ - run);
    if (i_ >= s_.size()) fail("unterminated string");
    const unsigned c = static_cast<unsigned char>(s_[i_]);
    if (c < 0x20)  // RFC 8259 section 7; serde_json refuses them too
      fail(
          fmt::format("raw control character U+{0:04X} in a string (hint: JSON needs it escaped, "
                      "as \\u{0:04x})",
                      c));
    if (s_[i_++] == '"') return;
    escape(out);
  }
}

// Skips one value of any kind; arrays and objects are walked with an explicit stack.
void JsonCursor::skip_value() {
  std::vector<char> open;  // the closing bracket each open container waits for
  do {
    if (!open.empty() && peek() == open.back()) {  // "[]" or "{}"
      ++i_;
      open.pop_back();
    } else {
      if (!open.empty() && open.back() == '}') {
        string(nullptr);
        expect(':');
      }
      char c = peek();
      if (c == '{' || c == '[') {
        ++i_;
        open.push_back(c == '{' ? '}' : ']');
        continue;  // its first element, or its immediate close
      }
      scalar();
    }
    // After a complete value: a comma continues the container, else it must close.
    while (!open.empty()) {
      char c = peek();
      if (c == ',') {
        ++i_;
        if (peek() == open.back()) fail("trailing comma");
        break;
      }
      if (c != open.back()) {
        fail(std::string("expected ',' or '") + open.back() + "', found " + describe(c));
      }
      ++i_;
      open.pop_back();
    }
  } while (!open.empty());
}

std::string JsonCursor::describe(char c) {
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return "byte " + std::to_string(static_cast<unsigned char>(c));
  }
  return std::string("'") + c + "'";
}

// After a backslash.
void JsonCursor::escape(std::string* out) {
  if (i_ >= s_.size()) fail("unterminated escape");
  char e = s_[i_++];
  char decoded;
  switch (e) {
    case '"':
    case '\\':
    case '/':
      decoded = e;
      break;
    case 'b':
      decoded = '\b';
      break;
    case 'f':
      decoded = '\f';
      break;
    case 'n':
      decoded = '\n';
      break;
    case 'r':
      decoded = '\r';
      break;
    case 't':
      decoded = '\t';
      break;
    case 'u': {
      unsigned cp = code_point();
      if (out) append_utf8(cp, *out);
      return;
    }
    default:
      i_ -= 2;  // point at the backslash
      fail("bad escape \\" + std::string(1, e) +
           " (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
  }
  if (out) *out += decoded;
}

// Four hex digits after "\u"; i_ is on the first of them.
unsigned JsonCursor::hex4() {
  for (size_t k = 0; k < 4; ++k) {
    if (i_ + k >= s_.size() || !is_hex(s_[i_ + k])) {
      i_ += k;
      fail("\\u must be followed by 4 hex digits");
    }
  }
  unsigned v = 0;
  for (size_t k = 0; k < 4; ++k) v = v * 16 + hex_value(s_[i_ + k]);
  i_ += 4;
  return v;
}

unsigned JsonCursor::code_point() {
  const size_t start = i_ - 2;  // the backslash, for errors about the pair
  unsigned cp = hex4();
  if (cp >= 0xDC00 && cp <= 0xDFFF) {
    i_ = start;
    fail("\\u escape is a lone low surrogate");
  }
  if (cp < 0xD800 || cp > 0xDBFF) return cp;
  if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') {
    i_ = start;
    fail("\\u escape is a high surrogate without a following low surrogate");
  }
  i_ += 2;
  unsigned low = hex4();
  if (low < 0xDC00 || low > 0xDFFF) {
    i_ -= 6;
    fail("\\u escape after a high surrogate is not a low surrogate");
  }
  return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
}

void JsonCursor::literal(const char* word) {
  for (size_t k = 0; word[k]; ++k, ++i_) {
    if (i_ >= s_.size() || s_[i_] != word[k]) fail("expected a value");
  }
}

void JsonCursor::digits() {
  if (i_ >= s_.size() || !is_digit(s_[i_])) fail("malformed number");
  while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
}

// JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
void JsonCursor::number() {
  if (s_[i_] == '-') ++i_;
  if (i_ < s_.size() && s_[i_] == '0') {
    ++i_;
  } else {
    digits();
  }
  if (i_ < s_.size() && s_[i_] == '.') {
    ++i_;
    digits();
  }
  if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
    ++i_;
    if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
    digits();
  }
}

void JsonCursor::scalar() {
  char c = peek();
  if (c == '"') {
    string(nullptr);
  } else if (c == 't') {
    literal("true");
  } else if (c == 'f') {
    literal("false");
  } else if (c == 'n') {
    literal("null");
  } else if (c == '-' || is_digit(c)) {
    number();
  } else {
    fail("expected a value, found " + describe(c));
  }
}

void JsonCursor::object(const std::function<void(const std::string& key)>& member) {
  expect('{');
  if (peek() == '}') {
    ++i_;
    return;
  }
  while (true) {
    std::string key;
    string(&key);
    expect(':');
    member(key);
    if (peek() == '}') break;
    expect(',');
    if (peek() == '}') fail("trailing comma");
  }
  ++i_;
}

uint64_t JsonCursor::unsigned_integer() {
  if (!is_digit(peek())) fail("expected a non-negative integer, found " + describe(s_[i_]));
  const size_t start = i_;
  number();
  uint64_t value = 0;
  for (size_t k = start; k < i_; ++k) {
    if (!is_digit(s_[k])) {
      i_ = start;
      fail("expected an integer, found a fraction or exponent");
    }
    const auto digit = static_cast<uint64_t>(s_[k] - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      i_ = start;
      fail("integer out of range");
    }
    value = value * 10 + digit;
  }
  return value;
}

double JsonCursor::real() {
  const char c = peek();
  if (c != '-' && !is_digit(c)) fail("expected a number, found " + describe(c));
  const size_t start = i_;
  number();
  const std::string text = s_.substr(start, i_ - start);
  errno = 0;
  const double value = std::strtod(text.c_str(), nullptr);
  if (errno == ERANGE && std::isinf(value)) {
    i_ = start;
    fail("number out of range");
  }
  return value;
}

std::string JsonCursor::number_text() {
  const char c = peek();
  if (c != '-' && !is_digit(c)) fail("expected a number, found " + describe(c));
  const size_t start = i_;
  number();
  return s_.substr(start, i_ - start);
}

bool JsonCursor::boolean() {
  const char c = peek();
  if (c == 't') {
    literal("true");
    return true;
  }
  if (c == 'f') {
    literal("false");
    return false;
  }
  fail("expected true or false, found " + describe(c));
}

bool JsonCursor::null() {
  if (peek() != 'n') return false;
  literal("null");
  return true;
}

}  // namespace titan
