#include "tokenizer/normalizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "tokenizer/json_spec.h"
#include "tokenizer/normal_form.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/utf8.h"

namespace titan {
namespace {

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// HF's Prepend: only a non-empty text gets the prefix.
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// HF's Replace: every match of the pattern (Oniguruma semantics) becomes `content`.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& pattern, std::string content, const std::string& where)
      : regex_(pattern, where), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    std::string out;
    size_t done = 0;
    regex_.find_all(text, [&](size_t start, size_t end) {
      out.append(text, done, start - done);
      out += content_;
      done = end;
    });
    if (done == 0 && out.empty()) return;  // no match
    out.append(text, done, std::string::npos);
    text.swap(out);
  }

 private:
  Regex regex_;
  std::string content_;
};

// HF's Strip: White_Space (Rust's char::is_whitespace) off either end.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t k = begin;
        if (!is_white_space(next_code_point(text, k))) break;
        begin = k;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t b = end - 1;
        while (b > begin && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t k = b;
        if (!is_white_space(next_code_point(text, k))) break;
        end = b;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// HF's NFD and NFC (normal_form.h).
class NormalFormNormalizer : public Normalizer {
 public:
  explicit NormalFormNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { to_normal_form(text, form_); }

 private:
  NormalForm form_;
};

// The ByteLevel normalizer: each byte becomes its ByteLevel character.
class ByteLevelNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override;
};

}  // namespace

uint32_t byte_level_char(unsigned char b);  // bpe.cpp

void ByteLevelNormalizer::normalize(std::string& text) const {
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char b : text) append_utf8(byte_level_char(b), out);
  text.swap(out);
}

namespace {

// A bound on what normalizers do to a text's length: at most scale x bytes + added. Sequence
// composes them.
struct Growth {
  double scale = 1, added = 0;
};

// The most a text grows through the normalizer `spec` (already built, so well formed). A Replace
// whose pattern could match the empty string (any regex, an empty string) is taken to insert its
// content at every position.
Growth growth_of(const Json& spec) {
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Sequence") {
    Growth total;
    for (const Json& part : spec.at("normalizers")) {
      const Growth g = growth_of(part);
      total = {g.scale * total.scale, g.scale * total.added + g.added};
    }
    return total;
  }
  if (type == "Prepend") {
    return {1, static_cast<double>(spec.at("prepend").get<std::string>().size())};
  }
  if (type == "ByteLevel") return {2, 0};  // a byte becomes a character of at most 2 bytes
  // A code point's canonical decomposition is at most 3 times its UTF-8 length (U+0390, 2 bytes,
  // to 3 code points of 2; a Hangul syllable to 3 jamo), and composition never lengthens.
  if (type == "NFC" || type == "NFD") return {static_cast<double>(normal_form_max_growth()), 0};
  if (type == "Replace") {
    const double content = static_cast<double>(spec.at("content").get<std::string>().size());
    const Json& pattern = spec.at("pattern");
    const double match = pattern.contains("String")
                             ? static_cast<double>(pattern.at("String").get<std::string>().size())
                             : 0;
    if (match == 0) return {1 + content, content};
    return {std::max(1.0, content / match), 0};
  }
  return {};  // Strip
}

// Beyond it a document's text could outgrow memory while it is encoded, late in a run; real
// tokenizers stay far below (SentencePiece's Prepend "▁" then Replace " " by "▁": 3 x + 9).
constexpr double kMaxNormalizerGrowth = 64;

std::unique_ptr<Normalizer> build_normalizer(const Json& spec, const std::string& where);

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& spec, const std::string& where) {
  auto normalizer = build_normalizer(spec, where);
  const Growth growth = growth_of(spec);
  if (growth.scale > kMaxNormalizerGrowth) {
    throw ConfigError(where,
                      fmt::format("the normalizers can grow a text up to {:.3g}-fold (the bound "
                                  "is {:.0f}): their Replace contents outgrow their patterns",
                                  growth.scale, kMaxNormalizerGrowth),
                      "check the tokenizer file's normalizer: is a Replace nested or inverted?");
  }
  return normalizer;
}

namespace {

std::unique_ptr<Normalizer> build_normalizer(const Json& spec, const std::string& where) {
  const std::string type = json_type(spec, where);
  if (type == "Sequence") {
    const Json& list = json_member(spec, "normalizers");
    if (!list.is_array()) {
      throw ConfigError(json_where(where, "normalizers"), "expected a list of normalizers",
                        "check the tokenizer file");
    }
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      parts.push_back(build_normalizer(list[i], fmt::format("{}.normalizers[{}]", where, i)));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(json_string(spec, "prepend", where));
  }
  if (type == "Replace") {
    const Json& pattern = json_member(spec, "pattern");
    const std::string content = json_string(spec, "content", where);
    const std::string pwhere = json_where(where, "pattern");
    if (pattern.is_object() && pattern.contains("String")) {
      return std::make_unique<ReplaceNormalizer>(
          escape_regex(json_string(pattern, "String", pwhere)), content, pwhere);
    }
    if (pattern.is_object() && pattern.contains("Regex")) {
      return std::make_unique<ReplaceNormalizer>(json_string(pattern, "Regex", pwhere), content,
                                                 pwhere);
    }
    throw ConfigError(pwhere, "expected {\"String\": ...} or {\"Regex\": ...}",
                      "check the tokenizer file");
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(spec, "strip_left", true, where),
                                             json_bool(spec, "strip_right", true, where));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "NFC") return std::make_unique<NormalFormNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<NormalFormNormalizer>(NormalForm::NFD);
  unsupported_component("normalizer", type, where);
}

}  // namespace

}  // namespace titan
