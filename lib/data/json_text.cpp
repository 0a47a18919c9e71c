// A minimal JSON reader: enough to take the "text" string out of one object per line, with
// escapes decoded, while skipping any other fields (nested or not).
#include <stdexcept>
#include <string>

#include "data/sources.h"

namespace titan {
namespace {

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
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool at_end() {
    skip_ws();
    return i_ >= s_.size();
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          append_utf8(out, code_point());
          break;
        default:
          fail(std::string("bad escape \\") + e);
      }
    }
  }

  void skip_value() {
    char c = peek();
    if (c == '"') {
      string();
    } else if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i_;
      if (peek() == close) {
        ++i_;
        return;
      }
      while (true) {
        if (c == '{') {
          string();
          expect(':');
        }
        skip_value();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(close);
        return;
      }
    } else {
      size_t start = i_;
      while (i_ < s_.size() && std::string(",}] \t\r\n").find(s_[i_]) == std::string::npos) ++i_;
      if (i_ == start) fail("expected a value");
    }
  }

  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + " at column " + std::to_string(i_ + 1));
  }

 private:
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = std::stoul(s_.substr(i_, 4), nullptr, 16);
    i_ += 4;
    return v;
  }
  unsigned code_point() {
    unsigned cp = hex4();
    if (cp >= 0xD800 && cp <= 0xDBFF && i_ + 6 <= s_.size() && s_[i_] == '\\' &&
        s_[i_ + 1] == 'u') {
      i_ += 2;
      unsigned low = hex4();
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    return cp;
  }
  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

std::string json_text_field(const std::string& line) {
  JsonCursor cur(line);
  cur.expect('{');
  bool found = false;
  std::string text;
  if (cur.peek() == '}') cur.fail("object has no \"text\" field");
  while (true) {
    std::string key = cur.string();
    cur.expect(':');
    if (key == "text" && cur.peek() == '"') {
      text = cur.string();
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
  if (!found) throw std::runtime_error("object has no \"text\" field");
  return text;
}

}  // namespace titan
