// Fuzzing the JSON reader: random and mutated JSONL lines never crash it and every failure is a
// JsonSyntaxError with a column inside the line; random valid objects decode to their text; the
// documents it builds for tokenizer files are nlohmann's parser's, on the same random inputs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "data/sources.h"
#include "tokenizer/json_document.h"
#include "util/json_cursor.h"
#include "util/strings.h"
#include "util/utf8.h"

using namespace titan;

namespace {

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

std::string printable(const std::string& line) {
  std::string out;
  for (unsigned char c : line.substr(0, 300)) {
    out +=
        c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out + (line.size() > 300 ? "..." : "");
}

// Parses `line`; fails the test on anything but success or a JsonSyntaxError inside the line.
bool parses(const std::string& line, std::string* text = nullptr) {
  try {
    std::string t = json_text_field(line);
    if (text) *text = t;
    return true;
  } catch (const JsonSyntaxError& e) {
    if (e.column() < 1 || e.column() > line.size() + 1 || std::string(e.what()).empty()) {
      FAIL("bad error column " << e.column() << " for: " << printable(line));
    }
    return false;
  } catch (const std::exception& e) {
    FAIL("not a JsonSyntaxError (" << e.what() << ") for: " << printable(line));
  }
  return false;
}

// A random string as JSON source and as the UTF-8 it decodes to.
void random_string(Rng& rng, std::string& json, std::string& decoded) {
  json += '"';
  for (size_t n = pick(rng, 12); n > 0; --n) {
    uint32_t cp;
    switch (pick(rng, 4)) {
      case 0:
        cp = 0x20 + static_cast<uint32_t>(pick(rng, 95));
        break;  // ASCII
      case 1:
        cp = static_cast<uint32_t>(pick(rng, 0x20));
        break;  // control: escaped
      case 2:
        cp = 0x80 + static_cast<uint32_t>(pick(rng, 0xD800 - 0x80));
        break;
      default:
        cp = 0x10000 + static_cast<uint32_t>(pick(rng, 0x100000));
        break;  // astral
    }
    append_utf8(cp, decoded);
    if (cp == '"' || cp == '\\') {
      json += '\\';
      json += static_cast<char>(cp);
    } else if (cp < 0x20 || (cp >= 0x80 && pick(rng, 2) == 0)) {
      if (cp >= 0x10000) {  // as a surrogate pair
        uint32_t v = cp - 0x10000;
        json += fmt::format("\\u{:04X}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        json += fmt::format("\\u{:04x}", cp);
      }
    } else {
      append_utf8(cp, json);
    }
  }
  json += '"';
}

// A random JSON value (no "text" key inside), as source text.
std::string random_value(Rng& rng, int depth) {
  std::string out, ignored;
  switch (depth > 4 ? pick(rng, 4) : pick(rng, 6)) {
    case 0:
      random_string(rng, out, ignored);
      return out;
    case 1:
      return std::vector<std::string>{"0", "-12", "3.25", "1e9", "-0.5E-3", "42"}[pick(rng, 6)];
    case 2:
      return std::vector<std::string>{"true", "false", "null"}[pick(rng, 3)];
    case 3:
      return "[]";
    case 4: {
      out = "[";
      for (size_t n = 1 + pick(rng, 3); n > 0; --n)
        out += random_value(rng, depth + 1) + (n > 1 ? ", " : "");
      return out + "]";
    }
    default: {
      out = "{";
      for (size_t n = 1 + pick(rng, 3); n > 0; --n) {
        out += "\"k" + std::to_string(pick(rng, 100)) + "\": " + random_value(rng, depth + 1);
        out += n > 1 ? "," : "";
      }
      return out + "}";
    }
  }
}

// A valid object line with a "text" field among others; `text` receives what it decodes to.
std::string random_object(Rng& rng, std::string& text) {
  std::string line = "{";
  size_t fields = 1 + pick(rng, 4), text_at = pick(rng, fields);
  for (size_t i = 0; i < fields; ++i) {
    if (i > 0) line += pick(rng, 2) ? ", " : ",";
    if (i == text_at) {
      line += "\"text\": ";
      random_string(rng, line, text);
    } else {
      line += "\"f" + std::to_string(i) + "\":" + random_value(rng, 0);
    }
  }
  return line + "}";
}

std::string mutate(Rng& rng, std::string line) {
  static const std::string kTokens[] = {"{",
                                        "}",
                                        "[",
                                        "]",
                                        "\"",
                                        ":",
                                        ",",
                                        "\\",
                                        "\\u",
                                        "\\uD800",
                                        "\\uDC00",
                                        "e",
                                        "-",
                                        ".",
                                        "0",
                                        "null",
                                        "tru",
                                        "\xEF\xBB\xBF",
                                        std::string(1, '\0'),
                                        "\xff",
                                        std::string(3000, '[')};
  for (size_t edits = 1 + pick(rng, 3); edits > 0; --edits) {
    size_t at = line.empty() ? 0 : pick(rng, line.size() + 1);
    switch (pick(rng, 5)) {
      case 0:
        if (at < line.size()) line.erase(at, 1 + pick(rng, 4));
        break;
      case 1:
        line.insert(at, kTokens[pick(rng, std::size(kTokens))]);
        break;
      case 2:
        if (at < line.size()) line[at] = static_cast<char>(pick(rng, 256));
        break;
      case 3:
        line = line.substr(0, at);
        break;  // truncated
      default:
        if (at < line.size()) line.insert(at, line.substr(at, pick(rng, 8)));
        break;
    }
  }
  return line;
}

std::string random_bytes(Rng& rng) {
  static const std::string kAlphabet = "{}[]\":,\\ u0123456789abcdefABCDEF-+.eEtrulsn\t";
  std::string line;
  for (size_t n = pick(rng, 80); n > 0; --n) {
    line +=
        pick(rng, 8) ? kAlphabet[pick(rng, kAlphabet.size())] : static_cast<char>(pick(rng, 256));
  }
  return line;
}

}  // namespace

TEST_CASE("json fuzz: valid random objects decode to exactly their text", "[data][fuzz]") {
  Rng rng(20260930);
  for (int i = 0; i < 2000; ++i) {
    std::string expected, decoded;
    std::string line = random_object(rng, expected);
    INFO(printable(line));
    REQUIRE(parses(line, &decoded));
    REQUIRE(decoded == expected);
  }
}

TEST_CASE("json fuzz: random and mutated lines never crash and fail only with a column",
          "[data][fuzz]") {
  const auto start = std::chrono::steady_clock::now();
  Rng rng(7);
  int rejected = 0, total = 0;
  for (int i = 0; i < 2000; ++i, ++total) rejected += !parses(random_bytes(rng));
  for (int i = 0; i < 4000; ++i, ++total) {
    std::string ignored;
    rejected += !parses(mutate(rng, random_object(rng, ignored)));
  }
  // Deep nesting, closed and not, in both kinds of brackets.
  for (size_t depth : {1000u, 100000u}) {
    for (auto [o, c] : {std::pair<char, char>{'[', ']'}, std::pair<char, char>{'{', '}'}}) {
      std::string nested = o == '[' ? std::string(depth, '[') + std::string(depth, ']') : [&] {
        std::string s;
        for (size_t k = 0; k < depth; ++k) s += "{\"a\":";
        return s + "1" + std::string(depth, '}');
      }();
      CHECK(parses("{\"x\": " + nested + ", \"text\": \"t\"}"));
      CHECK_FALSE(parses("{\"x\": " + nested.substr(0, nested.size() - 1) + ", \"text\": \"t\"}"));
      ++total;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(rejected << " of " << total << " lines rejected in " << seconds << " s");
  CHECK(rejected > total / 2);  // the mutations really break most lines
  CHECK(rejected < total);      // and some survive, so both paths are exercised
  CHECK(seconds < 20);
}

TEST_CASE("json: strict grammar for values that are skipped", "[data]") {
  CHECK(parses(R"({"a": [1, -2.5e+3, true, false, null, {"b": {}}], "text": "x"})"));
  for (const char* bad :
       {R"({"a": tru, "text": "x"})", R"({"a": 01, "text": "x"})", R"({"a": 1., "text": "x"})",
        R"({"a": [1,], "text": "x"})", R"({"a": {"b" 1}, "text": "x"})", R"({"a": -, "text": "x"})",
        R"({"a": xyz, "text": "x"})", R"({"text": "x", "text": "y"})", R"({"text": "\uD800x"})",
        R"({"text": "x"} tail)"}) {
    INFO(bad);
    CHECK_FALSE(parses(bad));
  }
  std::string text;
  REQUIRE(parses(R"({"text": "\ud83d\ude00 caf\u00E9 \"q\" \\ \/ \b\f\n\r\t"})", &text));
  CHECK(text == "\xF0\x9F\x98\x80 caf\xC3\xA9 \"q\" \\ / \b\f\n\r\t");
}

// RFC 8259 section 7, and Hugging Face's readers (serde_json) refuse them as well: a raw tab, CR
// or NUL inside a string is an error at its column, in a key, in the text and in a skipped value.
TEST_CASE("json: a raw control character in a string is refused at its column, with a hint",
          "[data]") {
  for (const std::string& bad :
       {std::string("{\"text\": \"a\tb\"}"), std::string("{\"text\": \"a\rb\"}"),
        std::string("{\"text\": \"a\0b\"}", 15), std::string("{\"k\x1f\": 1, \"text\": \"x\"}"),
        std::string("{\"a\": [\"\x01\"], \"text\": \"x\"}")}) {
    INFO(printable(bad));
    CHECK_FALSE(parses(bad));
  }
  try {
    json_text_field("{\"text\": \"a\tb\"}");
    FAIL("a raw tab was accepted");
  } catch (const JsonSyntaxError& e) {
    CHECK(e.column() == 12);
    CHECK(std::string(e.what()) ==
          "column 12: raw control character U+0009 in a string (hint: JSON needs it escaped, "
          "as \\u0009)");
  }
  CHECK(parses("{\"text\": \"a\\tb\"}"));  // the escaped form still reads
}

// The writers' one quoting helper (spans, safetensors headers, replay reports): every
// ASCII byte, control characters included, and UTF-8 text read back unchanged through the strict
// reader, and the escapes are the short, standard ones.
TEST_CASE("json: json_quoted text reads back unchanged, every ASCII byte and UTF-8 included",
          "[data]") {
  std::string ascii;
  for (int c = 1; c < 0x80; ++c) ascii += static_cast<char>(c);
  for (const std::string& text :
       {std::string(), ascii, std::string("caf\xc3\xa9 \xe2\x82\xac"), std::string("a\0b", 3)}) {
    const std::string quoted = json_quoted(text);
    INFO(printable(quoted));
    // JSON allows no raw control character in a string (the reader refuses one).
    CHECK(std::none_of(quoted.begin(), quoted.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20; }));
    std::string back;
    JsonCursor cursor(quoted);
    cursor.string(&back);
    CHECK(cursor.at_end());
    CHECK(back == text);
  }
  CHECK(json_quoted("a\"b\\c\n\x1f") == "\"a\\\"b\\\\c\\u000a\\u001f\"");
}

namespace {

// The deepest bracket nesting of `text` (strings not skipped: an upper bound).
size_t bracket_depth(const std::string& text) {
  size_t depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

// Whether the tokenizer files' reader and nlohmann's own parser agree on `text`: both refuse it,
// or both read the same document (compared as text, so that 1 and 1.0 differ).
// Returns whether they read it.
bool require_same_document(const std::string& text) {
  std::optional<nlohmann::json> ours, theirs;
  try {
    ours = parse_json_document<nlohmann::json>(text);
  } catch (const JsonSyntaxError& e) {
    REQUIRE(e.column() >= 1);
    REQUIRE(e.column() <= text.size() + 1);
  }
  INFO(printable(text));
  if (text.find('\0') != std::string::npos) {
    // nlohmann's parser takes a NUL byte for the end of its input; JSON (and serde_json, Hugging
    // Face's reader) has no raw NUL, in a string or out.
    REQUIRE_FALSE(ours);
    return false;
  }
  try {
    theirs = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  REQUIRE(ours.has_value() == theirs.has_value());
  if (ours) REQUIRE(ours->dump() == theirs->dump());
  return ours.has_value();
}

}  // namespace

TEST_CASE(
    "json: the tokenizer files' documents read as nlohmann's parser reads them, or both refuse",
    "[tokenizer][fuzz]") {
  Rng rng(20261207);
  int accepted = 0, total = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string valid = random_value(rng, 0);
    // nlohmann skips a leading byte-order mark; serde_json (Hugging Face's reader) and this
    // reader refuse it. Deeper nesting than the files' bound never reaches the reader.
    for (const std::string& text : {valid, mutate(rng, valid), random_bytes(rng)}) {
      if (text.rfind("\xEF\xBB\xBF", 0) == 0 || bracket_depth(text) > 64) continue;
      accepted += require_same_document(text);
      ++total;
    }
  }
  for (const char* text :
       {"18446744073709551615", "18446744073709551616", "-9223372036854775808",
        "-9223372036854775809", "[1e400]", "-0", "0.0", "1E+2", "{\"a\": 1, \"a\": 2}",
        "\"\\u0000\"", "\"\\ud83d\\ude00\"", "\"\xc3\x28\"", "{\"\xff\": 1}", " [ ] ", "1 2"}) {
    require_same_document(text);
  }
  CHECK(total > 8000);
  CHECK(accepted > 3000);          // every valid document, and some mutated ones
  CHECK(accepted < total - 3000);  // while most mutations and random bytes are refused
}

TEST_CASE("json: a tokenizer file's malformed document is named by line and column",
          "[tokenizer]") {
  const auto error_of = [](const std::string& text) {
    try {
      (void)parse_json_document<nlohmann::ordered_json>(text);
    } catch (const JsonSyntaxError& e) {
      return std::make_pair(e.column(), std::string(e.what()));
    }
    return std::make_pair(size_t(0), std::string());
  };
  CHECK(error_of("{\"a\": [1, 2,]}") ==
        std::make_pair(size_t(13), std::string("column 13: trailing comma")));
  CHECK(error_of("{\"a\": \"\xc3\x28\"}").first == 7);  // the string's quote
  CHECK(error_of("[1] x").second == "column 5: trailing characters after the document");
  // Member order is the file's (torchtitan adds added_tokens_decoder entries in file order).
  const auto doc = parse_json_document<nlohmann::ordered_json>("{\"z\": 1, \"a\": 2, \"z\": 3}");
  CHECK(doc.dump() == "{\"z\":3,\"a\":2}");
}
