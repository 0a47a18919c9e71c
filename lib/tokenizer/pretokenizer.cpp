#include "tokenizer/pretokenizer.h"

#include <fmt/format.h>

#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/json_spec.h"
#include "tokenizer/regex.h"
#include "util/error.h"
#include "util/utf8.h"

namespace titan {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const Json& spec, const std::string& where) {
  const std::string b = json_string(spec, "behavior", where);
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  throw ConfigError(json_where(where, "behavior"), fmt::format("unknown behavior \"{}\"", b),
                    "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

struct Span {
  size_t start, end;
  bool match;
};

// HF's NormalizedString::split: the matches and the text between them, combined per behavior.
void split_by(std::string_view text, const Regex& regex, bool invert, Behavior behavior,
              bool at_start, const PieceSink& sink) {
  if (text.empty()) return;
  thread_local std::vector<Span> spans_storage;
  std::vector<Span> spans;
  spans.swap(spans_storage);
  spans.clear();
  size_t prev = 0;
  regex.find_all(text, [&](size_t s, size_t e) {
    if (prev != s) spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  });
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});
  std::vector<Span> out;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Span& s : spans) out.push_back({s.start, s.end, false});
      break;
    case Behavior::kRemoved:
      out = spans;
      break;
    case Behavior::kContiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match == previous && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match && !previous && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !previous && !out.empty()) {
          out.back().start = s.start;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  spans.swap(spans_storage);
  for (const Span& s : out) {
    if (s.match || s.end == s.start) continue;  // removed, or empty
    sink(text.substr(s.start, s.end - s.start), false, at_start && s.start == 0);
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const std::string& pattern, Behavior behavior, bool invert,
                    const std::string& where)
      : regex_(pattern, where), behavior_(behavior), invert_(invert) {}
  void split(std::string_view text, bool at_start, const PieceSink& sink) const override {
    split_by(text, regex_, invert_, behavior_, at_start, sink);
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, as HF's ByteLevel pre-tokenizer has it.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_unique<Regex>(kGpt2Pattern, "ByteLevel") : nullptr) {}
  void set_last() override { emit_raw_ = true; }
  void split(std::string_view text, bool at_start, const PieceSink& sink) const override {
    std::string prefixed;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      prefixed = " ";
      prefixed += text;
      text = prefixed;
    }
    auto emit = [&](std::string_view piece, bool, bool start) {
      if (emit_raw_) {
        sink(piece, true, start);
        return;
      }
      std::string mapped;
      for (unsigned char b : piece) append_utf8(byte_level_char(b), mapped);
      sink(mapped, false, start);
    };
    if (regex_) {
      split_by(text, *regex_, false, Behavior::kIsolated, at_start, emit);
    } else if (!text.empty()) {
      emit(text, false, at_start);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
  bool emit_raw_ = false;
};

// Splitters defined by a pattern: Digits, Whitespace, WhitespaceSplit, CharDelimiterSplit.
class PatternPreTokenizer : public PreTokenizer {
 public:
  PatternPreTokenizer(const std::string& pattern, bool invert, Behavior behavior)
      : regex_(pattern, "pre_tokenizer"), invert_(invert), behavior_(behavior) {}
  void split(std::string_view text, bool at_start, const PieceSink& sink) const override {
    split_by(text, regex_, invert_, behavior_, at_start, sink);
  }

 private:
  Regex regex_;
  bool invert_;
  Behavior behavior_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)),
        prepend_(prepend),
        splitter_(split ? std::make_unique<Regex>(escape_regex(replacement_), "Metaspace")
                        : nullptr) {}
  void split(std::string_view text, bool at_start, const PieceSink& sink) const override {
    std::string s;
    for (char c : text) {
      if (c == ' ') {
        s += replacement_;
      } else {
        s += c;
      }
    }
    const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start))) {
      s.insert(0, replacement_);
    }
    if (splitter_) {
      split_by(s, *splitter_, false, Behavior::kMergedWithNext, at_start, sink);
    } else if (!s.empty()) {
      sink(s, false, at_start);
    }
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  std::unique_ptr<Regex> splitter_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void set_last() override {
    if (!parts_.empty()) parts_.back()->set_last();
  }
  void split(std::string_view text, bool at_start, const PieceSink& sink) const override {
    run(0, text, at_start, sink);
  }

 private:
  void run(size_t i, std::string_view text, bool at_start, const PieceSink& sink) const {
    if (i == parts_.size()) {
      sink(text, false, at_start);
      return;
    }
    if (i + 1 == parts_.size()) {
      parts_[i]->split(text, at_start, sink);
      return;
    }
    parts_[i]->split(text, at_start, [&](std::string_view piece, bool, bool start) {
      run(i + 1, piece, start, sink);
    });
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec, const std::string& where) {
  const std::string type = json_type(spec, where);
  if (type == "Sequence") {
    const Json& list = json_member(spec, "pretokenizers");
    if (!list.is_array()) {
      throw ConfigError(json_where(where, "pretokenizers"), "expected a list of pre-tokenizers",
                        "check the tokenizer file");
    }
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_pre_tokenizer(list[i], fmt::format("{}.pretokenizers[{}]", where, i)));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    const Json& pattern = json_member(spec, "pattern");
    const std::string pwhere = json_where(where, "pattern");
    std::string regex;
    if (pattern.is_object() && pattern.contains("String")) {
      regex = escape_regex(json_string(pattern, "String", pwhere));
    } else if (pattern.is_object() && pattern.contains("Regex")) {
      regex = json_string(pattern, "Regex", pwhere);
    } else {
      throw ConfigError(pwhere, "expected {\"String\": ...} or {\"Regex\": ...}",
                        "check the tokenizer file");
    }
    return std::make_unique<SplitPreTokenizer>(regex, parse_behavior(spec, where),
                                               json_bool(spec, "invert", false, where), pwhere);
  }
  if (type == "ByteLevel") {
    return make_byte_level_pre_tokenizer(json_bool(spec, "add_prefix_space", true, where),
                                         json_bool(spec, "use_regex", true, where));
  }
  if (type == "Digits") {
    // Rust's char::is_numeric (its own Unicode tables); one digit at a time, or runs.
    const bool individual = json_bool(spec, "individual_digits", false, where);
    return std::make_unique<PatternPreTokenizer>(individual ? R"(\p{Rust_N})" : R"(\p{Rust_N}+)",
                                                 false, Behavior::kIsolated);
  }
  if (type == "Whitespace") {
    // The regex crate's \w+|[^\w\s]+, the matches kept.
    return std::make_unique<PatternPreTokenizer>(
        R"([\p{Rust_Word}]+|[^\p{Rust_Word}\p{Rust_White_Space}]+)", true, Behavior::kRemoved);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<PatternPreTokenizer>(R"(\p{Rust_White_Space})", false,
                                                 Behavior::kRemoved);
  }
  if (type == "CharDelimiterSplit") {
    return std::make_unique<PatternPreTokenizer>(
        escape_regex(json_string(spec, "delimiter", where)), false, Behavior::kRemoved);
  }
  if (type == "Metaspace") {
    const std::string scheme =
        json_optional_string(spec, "prepend_scheme", where).value_or("always");
    // Old files say add_prefix_space; false must come with prepend_scheme "never" (HF's rule).
    if (!json_bool(spec, "add_prefix_space", true, where) && scheme != "never") {
      throw ConfigError(json_where(where, "add_prefix_space"),
                        "add_prefix_space false does not match prepend_scheme",
                        "Hugging Face tokenizers refuses this file too");
    }
    MetaspacePreTokenizer::Prepend prepend = MetaspacePreTokenizer::Prepend::kAlways;
    if (scheme == "first") {
      prepend = MetaspacePreTokenizer::Prepend::kFirst;
    } else if (scheme == "never") {
      prepend = MetaspacePreTokenizer::Prepend::kNever;
    } else if (scheme != "always") {
      throw ConfigError(json_where(where, "prepend_scheme"),
                        fmt::format("unknown prepend_scheme \"{}\"", scheme),
                        "one of always, first, never");
    }
    return std::make_unique<MetaspacePreTokenizer>(
        json_optional_string(spec, "replacement", where).value_or("\xE2\x96\x81"), prepend,
        json_bool(spec, "split", true, where));
  }
  unsupported_component("pre-tokenizer", type, where);
}

}  // namespace titan
