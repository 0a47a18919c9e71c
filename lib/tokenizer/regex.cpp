#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <cctype>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/utf8.h"

namespace titan {
namespace {

// A property as PCRE2 class items: its base (PCRE2's own \p{name}, or for the Rust tables the
// PCRE2 spelling of Rust's definition) plus the code points the base lacks; `surplus` counts the
// code points the base has that the table does not (these cannot be taken out of a class).
struct PropertyFix {
  std::string base;
  std::string additions;
  size_t surplus = 0;
  bool known = true;  // PCRE2 compiles the base
};

std::string white_space_items();

// The base items of a table: Rust's char::is_numeric is \p{N}; the regex crate's \w is
// Alphabetic, marks, decimal numbers, connector punctuation and the two joiners.
std::string base_items(const std::string& name) {
  if (name == "Rust_N") return "\\p{N}";
  if (name == "Rust_Word") return "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
  if (name == "Rust_White_Space") return white_space_items();
  return fmt::format("\\p{{{}}}", name);
}

pcre2_code* compile_or_null(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                       PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
}

// Compares the base with the table, code point by code point (once per property and process:
// tens of milliseconds).
PropertyFix compute_fix(const UnicodeTable& table) {
  PropertyFix fix;
  fix.base = base_items(table.name);
  pcre2_code* code = compile_or_null("[" + fix.base + "]");
  if (code == nullptr) {
    fix.known = false;
    return fix;
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  auto matches = [&](uint32_t c) {
    std::string s;
    append_utf8(c, s);
    return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                       PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, nullptr) >= 0;
  };
  uint32_t next = 0;  // first code point not yet looked at
  auto add_missing = [&](uint32_t first, uint32_t last) {
    for (uint32_t c = first; c <= last; ++c) {
      if (matches(c)) continue;
      uint32_t end = c;
      while (end < last && !matches(end + 1)) ++end;
      fix.additions += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", c, end);
      c = end;
    }
  };
  auto count_surplus = [&](uint32_t first, uint32_t last) {
    for (uint32_t c = first; c <= last; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      if (matches(c)) ++fix.surplus;
    }
  };
  for (size_t i = 0; i < table.count; ++i) {
    if (table.ranges[i].first > next) count_surplus(next, table.ranges[i].first - 1);
    add_missing(table.ranges[i].first, table.ranges[i].last);
    next = table.ranges[i].last + 1;
  }
  count_surplus(next, 0x10FFFF);
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return fix;
}

const UnicodeTable* find_table(const std::string& name) { return find_unicode_table(name); }

const PropertyFix& property_fix(const UnicodeTable& table) {
  static std::mutex mutex;
  static std::vector<std::pair<const UnicodeTable*, PropertyFix>> fixes;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [t, fix] : fixes) {
    if (t == &table) return fix;
  }
  fixes.reserve(unicode_tables_end() - unicode_tables_begin());  // references stay valid
  fixes.emplace_back(&table, compute_fix(table));
  return fixes.back().second;
}

// Oniguruma's long property names for the short ones the tables use.
std::string canonical_property(std::string name) {
  std::string key;
  for (char c : name) {
    if (c != '_' && c != ' ' && c != '-') key += static_cast<char>(std::tolower(c));
  }
  static const std::pair<const char*, const char*> kAliases[] = {{"letter", "L"},
                                                                 {"uppercaseletter", "Lu"},
                                                                 {"lowercaseletter", "Ll"},
                                                                 {"titlecaseletter", "Lt"},
                                                                 {"modifierletter", "Lm"},
                                                                 {"otherletter", "Lo"},
                                                                 {"mark", "M"},
                                                                 {"combiningmark", "M"},
                                                                 {"nonspacingmark", "Mn"},
                                                                 {"spacingmark", "Mc"},
                                                                 {"enclosingmark", "Me"},
                                                                 {"number", "N"},
                                                                 {"decimalnumber", "Nd"},
                                                                 {"letternumber", "Nl"},
                                                                 {"othernumber", "No"},
                                                                 {"punctuation", "P"},
                                                                 {"connectorpunctuation", "Pc"},
                                                                 {"symbol", "S"},
                                                                 {"alphabetic", "Alphabetic"},
                                                                 {"alpha", "Alphabetic"}};
  for (const auto& [alias, short_name] : kAliases) {
    if (key == alias) return short_name;
  }
  for (const UnicodeTable* t = unicode_tables_begin(); t != unicode_tables_end(); ++t) {
    std::string lower;
    for (const char* p = t->name; *p; ++p) {
      if (*p != '_') lower += static_cast<char>(std::tolower(*p));
    }
    if (key == lower) return t->name;
  }
  return name;
}

std::string white_space_items() {
  std::string items;
  const UnicodeTable& ws = *find_unicode_table("White_Space");
  for (size_t i = 0; i < ws.count; ++i) {
    items += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", ws.ranges[i].first, ws.ranges[i].last);
  }
  return items;
}

}  // namespace

std::string escape_regex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\.+*?()|[]{}^$#&-~").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string translate_regex(const std::string& pattern, const std::string& where) {
  auto refuse = [&](const std::string& what) {
    throw ConfigError(where, fmt::format("regex \"{}\": {}", pattern, what),
                      "titan-train matches tokenizer regexes exactly or not at all; this "
                      "construct is not supported");
  };
  const std::string ws = white_space_items();
  std::string out;
  bool in_class = false;
  size_t class_start = 0;  // index in `out` right after the class's '[' (and '^')
  // Class items (`positive`) or a negated class escape (`negated`) for one escape.
  auto emit = [&](const std::string& items, bool negated, const char* name) {
    if (in_class) {
      if (negated) refuse(fmt::format("a negated escape ({}) inside a character class", name));
      out += items;
    } else {
      out += negated ? "[^" : "[";
      out += items;
      out += ']';
    }
  };
  auto property_items = [&](const std::string& name, bool negated, const std::string& spelled) {
    const std::string canon = canonical_property(name);
    const UnicodeTable* table = find_table(canon);
    if (table == nullptr) {  // scripts and the like: PCRE2's own tables
      out += fmt::format("\\{}{{{}}}", negated ? 'P' : 'p', name);
      return;
    }
    const PropertyFix& fix = property_fix(*table);
    if (!fix.known) refuse(fmt::format("PCRE2 does not know the property {}", spelled));
    if (fix.surplus > 0) {
      refuse(
          fmt::format("the PCRE2 library's Unicode tables put {} code points in {} that "
                      "the reference (Hugging Face tokenizers, tiktoken) does not",
                      fix.surplus, spelled));
    }
    const bool single =
        fix.base.rfind("\\p{", 0) == 0 && fix.base.find('\\', 1) == std::string::npos;
    if (fix.additions.empty() && single) {  // PCRE2's own property is exact: keep its spelling
      out += fmt::format("\\{}{{{}}}", negated ? 'P' : 'p', canon);
      return;
    }
    emit(fix.base + fix.additions, negated, spelled.c_str());
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = out.size();
      continue;
    }
    if (in_class && c == '[') {
      if (pattern.compare(i, 2, "[:") == 0) {  // a POSIX class: copy through its "]"
        const size_t close = pattern.find(":]", i + 2);
        if (close == std::string::npos) refuse("an unterminated POSIX class");
        out += pattern.substr(i, close + 2 - i);
        i = close + 1;
        continue;
      }
      refuse("a nested character class (Oniguruma set operations)");
    }
    if (in_class && c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
      refuse("a class intersection (&&)");
    }
    if (in_class && c == ']' && out.size() > class_start) {
      in_class = false;
      out += c;
      continue;
    }
    if (c != '\\' || i + 1 >= pattern.size()) {
      out += c;
      continue;
    }
    const char e = pattern[++i];
    switch (e) {
      case 's':
        emit(ws, false, "\\s");
        break;
      case 'S':
        emit(ws, true, "\\S");
        break;
      case 'h':
        emit("0-9a-fA-F", false, "\\h");
        break;
      case 'H':
        emit("0-9a-fA-F", true, "\\H");
        break;
      case 'd':
        property_items("Nd", false, "\\d");
        break;
      case 'D':
        property_items("Nd", true, "\\D");
        break;
      case 'w':
      case 'W': {
        // Oniguruma's \w: letters, marks, numbers and connector punctuation.
        std::string items;
        for (const char* p : {"L", "M", "N", "Pc"}) {
          const PropertyFix& fix = property_fix(*find_table(p));
          if (fix.surplus > 0) refuse("PCRE2's Unicode tables disagree with the reference on \\w");
          items += fix.base + fix.additions;
        }
        emit(items, e == 'W', e == 'w' ? "\\w" : "\\W");
        break;
      }
      case 'p':
      case 'P': {
        std::string name;
        if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
          const size_t close = pattern.find('}', i + 2);
          if (close == std::string::npos) refuse("an unterminated \\p{...}");
          name = pattern.substr(i + 2, close - i - 2);
          i = close;
        } else if (i + 1 < pattern.size()) {
          name = pattern.substr(++i, 1);
        }
        bool negated = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.erase(0, 1);
        }
        property_items(name, negated, fmt::format("\\{}{{{}}}", e, name));
        break;
      }
      case 'u': {  // Oniguruma's \uHHHH
        if (i + 4 >= pattern.size()) refuse("a short \\u escape");
        out += fmt::format("\\x{{{}}}", pattern.substr(i + 1, 4));
        i += 4;
        break;
      }
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, const std::string& where) : code_(new Code) {
  translated_ = translate_regex(pattern, where);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MULTILINE: in Oniguruma's Ruby syntax ^ and $ are line anchors.
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw ConfigError(where,
                      fmt::format("regex \"{}\" does not compile: {}", pattern,
                                  reinterpret_cast<const char*>(message)),
                      "fix the pattern in the tokenizer file");
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // without JIT (no support) it interprets
}

Regex::~Regex() = default;

namespace {

// Per-thread match state: the match data (one pair is all find_all reads) and a JIT stack large
// enough for the longest run a bounded input can hold.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() {
    pcre2_jit_stack_assign(context, nullptr, stack);
    pcre2_set_heap_limit(context, 1u << 22);  // KiB: 4 GiB for the interpreter's backtracking
  }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

}  // namespace

bool Regex::search(std::string_view text, size_t from, size_t& start, size_t& end) const {
  thread_local MatchState state;
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                             from, PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw RuntimeFailure(
        fmt::format("tokenizer regex {}: {}", translated_, reinterpret_cast<const char*>(message)));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  start = ovector[0];
  end = ovector[1];
  return true;
}

size_t Regex::step(std::string_view text, size_t pos) {
  return utf8_length(static_cast<unsigned char>(text[pos]));
}

}  // namespace titan
