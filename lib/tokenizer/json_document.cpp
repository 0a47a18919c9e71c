#include "tokenizer/json_document.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "util/json_cursor.h"
#include "util/utf8.h"

namespace titan {
namespace {

template <class Document>
class DocumentBuilder {
 public:
  explicit DocumentBuilder(const std::string& text) : cursor_(text) {}

  Document document() {
    Document doc = value();
    if (!cursor_.at_end()) cursor_.fail("trailing characters after the document");
    return doc;
  }

 private:
  Document value() {
    const char c = cursor_.peek();
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return Document(string());
    if (c == 't' || c == 'f') return Document(cursor_.boolean());
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (cursor_.null()) return Document(nullptr);
    cursor_.fail("expected a value");
  }

  Document object() {
    Document out = Document::object();
    cursor_.object([&](const std::string& key) {
      if (!is_valid_utf8(key)) cursor_.fail("a key is not valid UTF-8");
      out[key] = value();
    });
    return out;
  }

  Document array() {
    Document out = Document::array();
    cursor_.expect('[');
    if (cursor_.peek() == ']') {
      cursor_.expect(']');
      return out;
    }
    while (true) {
      out.push_back(value());
      if (cursor_.peek() == ']') break;
      cursor_.expect(',');
      if (cursor_.peek() == ']') cursor_.fail("trailing comma");
    }
    cursor_.expect(']');
    return out;
  }

  std::string string() {
    cursor_.skip_ws();
    const size_t start = cursor_.offset();
    std::string s;
    cursor_.string(&s);
    if (!is_valid_utf8(s)) {
      throw JsonSyntaxError("a string is not valid UTF-8", start + 1);
    }
    return s;
  }

  // Integers keep their exact value where 64 bits hold it, as nlohmann's parser keeps them.
  Document number() {
    cursor_.skip_ws();
    const size_t start = cursor_.offset();
    const std::string text = cursor_.number_text();
    const bool integer = text.find_first_of(".eE") == std::string::npos;
    errno = 0;
    if (integer && text[0] != '-') {
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == 0) return Document(static_cast<uint64_t>(v));
    } else if (integer) {
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) return Document(static_cast<int64_t>(v));
    }
    errno = 0;
    const double v = std::strtod(text.c_str(), nullptr);
    if (errno == ERANGE && (v == std::numeric_limits<double>::infinity() ||
                            v == -std::numeric_limits<double>::infinity())) {
      throw JsonSyntaxError("number out of range", start + 1);
    }
    return Document(v);
  }

  JsonCursor cursor_;
};

}  // namespace

template <class Document>
Document parse_json_document(const std::string& text) {
  return DocumentBuilder<Document>(text).document();
}

template nlohmann::json parse_json_document<nlohmann::json>(const std::string&);
template nlohmann::ordered_json parse_json_document<nlohmann::ordered_json>(const std::string&);

}  // namespace titan
