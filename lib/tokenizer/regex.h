// The regular expressions of tokenizer files, run with PCRE2's JIT so that they match exactly
// what Hugging Face tokenizers (Oniguruma, Ruby syntax) and tiktoken (fancy-regex) match.
//
// Three things differ between PCRE2 and those engines, and the translation here removes them:
//  - Unicode tables: Debian's PCRE2 (10.42) knows Unicode 14, the references Unicode 16.0.
//    \p{L}, \p{N}, ... get the code points PCRE2 lacks added from unicode_tables.inc (generated
//    from the reference engine); a PCRE2 whose tables hold code points the references do not is
//    refused (ConfigError), never used silently. \p{Rust_N}, \p{Rust_Word} and
//    \p{Rust_White_Space} (unicode.h: the library's Rust-side tables) are titan's own names for
//    the pre-tokenizers that use Rust's definitions.
//  - \s is Unicode's White_Space in the references (with U+0085, without U+180E): spelled out.
//  - \d and \w follow Oniguruma (\p{Nd}; letters, marks, numbers, connector punctuation), and
//    \h is Oniguruma's hexadecimal digit.
// find_all() steps past empty matches the way Oniguruma's iterator does (an empty match right
// after the previous match is skipped), not the way Perl does.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace titan {

class Regex {
 public:
  // Compiles `pattern` (Oniguruma/Rust syntax). Throws ConfigError at `where` (the file and the
  // component) for a pattern PCRE2 cannot compile or that uses a construct this translation cannot
  // make exact (a negated class escape such as \S inside [...] whose table needs additions).
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for each match in `text` (well-formed UTF-8), left to right.
  // Thread-safe; throws RuntimeFailure if PCRE2 gives up (a resource limit).
  // Calls on_match(start, end) for each match in `text` (well-formed UTF-8), left to right, as
  // the onig crate's find_iter yields them. Thread-safe; throws RuntimeFailure if PCRE2 gives
  // up (a resource limit), which no input of bounded size reaches with the tokenizers' patterns.
  template <typename F>
  void find_all(std::string_view text, F&& on_match) const {
    size_t from = 0;
    bool have_last = false;
    size_t last_end = 0;
    size_t start = 0, end = 0;
    while (from <= text.size() && search(text, from, start, end)) {
      if (start == end && have_last && end == last_end) {
        from += from < text.size() ? step(text, from) : 1;  // skip the empty match, search on
        continue;
      }
      from = end;
      have_last = true;
      last_end = end;
      on_match(start, end);
    }
  }

  // The pattern as PCRE2 compiled it (for messages and tests).
  const std::string& translated() const { return translated_; }

 private:
  bool search(std::string_view text, size_t from, size_t& start, size_t& end) const;
  static size_t step(std::string_view text, size_t pos);

  std::string translated_;
  struct Code;
  std::unique_ptr<Code> code_;
};

// The Oniguruma/Rust pattern `pattern` rewritten for PCRE2 (see above). Throws ConfigError.
std::string translate_regex(const std::string& pattern, const std::string& where);

// `text` with regex metacharacters escaped, as Rust's regex::escape (a literal Split pattern).
std::string escape_regex(std::string_view text);

}  // namespace titan
