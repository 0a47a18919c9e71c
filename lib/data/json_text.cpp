// A strict, non-recursive JSON reader: enough to take the "text" string out of one object per
// line, with escapes decoded, while checking and skipping any other fields (nested or not).
//
// Nesting is tracked with an explicit stack, so no input can exhaust the call stack; every
// malformed input ends in JsonSyntaxError with the 1-based column of the offending character.
#include <string>
#include <vector>

#include "data/sources.h"
#include "util/strings.h"

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

class JsonCursor {
 public:
  explicit JsonCursor(const std::string& s) : s_(s) {}

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n'))
      ++i_;
  }
  char peek() {
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of line");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "', found " + describe(s_[i_]));
    ++i_;
  }
  bool at_end() {
    skip_ws();
    return i_ >= s_.size();
  }

  // A string; with `out` null its escapes are checked but nothing is kept.
  void string(std::string* out) {
    expect('"');
    while (true) {
      size_t run = i_;
      while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\') ++i_;
      if (out) out->append(s_, run, i_ - run);
      if (i_ >= s_.size()) fail("unterminated string");
      if (s_[i_++] == '"') return;
      escape(out);
    }
  }

  // Skips one value of any kind; arrays and objects are walked with an explicit stack.
  void skip_value() {
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

  [[noreturn]] void fail(const std::string& what) { throw JsonSyntaxError(what, i_ + 1); }

 private:
  static std::string describe(char c) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return "byte " + std::to_string(static_cast<unsigned char>(c));
    }
    return std::string("'") + c + "'";
  }

  // After a backslash.
  void escape(std::string* out) {
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
        if (out) append_utf8(*out, cp);
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
  unsigned hex4() {
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

  unsigned code_point() {
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

  void literal(const char* word) {
    for (size_t k = 0; word[k]; ++k, ++i_) {
      if (i_ >= s_.size() || s_[i_] != word[k]) fail("expected a value");
    }
  }

  void digits() {
    if (i_ >= s_.size() || !is_digit(s_[i_])) fail("malformed number");
    while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
  }

  // JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  void number() {
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

  void scalar() {
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

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

JsonSyntaxError::JsonSyntaxError(const std::string& what, size_t column)
    : std::runtime_error("column " + std::to_string(column) + ": " + what), column_(column) {}

std::string json_text_field(const std::string& line) {
  JsonCursor cur(line);
  cur.expect('{');
  bool found = false;
  std::string text;
  if (cur.peek() == '}') cur.fail("object has no \"text\" field");
  while (true) {
    std::string key;
    cur.string(&key);
    cur.expect(':');
    if (key == "text" && found) cur.fail("duplicate \"text\" field");
    if (key == "text" && cur.peek() == '"') {
      cur.string(&text);
      found = true;
    } else if (key == "text") {
      cur.fail("\"text\" is not a string");
    } else {
      cur.skip_value();
    }
    if (cur.peek() == ',') {
      cur.expect(',');
      continue;
    }
    cur.expect('}');
    break;
  }
  if (!cur.at_end()) cur.fail("trailing characters after the object");
  if (!found) throw JsonSyntaxError("object has no \"text\" field", line.size() + 1);
  return text;
}

}  // namespace titan
