// TOML -> Config, with errors that point at file:line:col.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "config/field_io.h"
#include "config/loader.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

std::string where(const std::string& source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

std::string describe(const toml::node& node) {
  if (auto v = node.as_string()) return "string " + toml_quote(v->get());
  if (auto v = node.as_integer()) return fmt::format("integer {}", v->get());
  if (auto v = node.as_floating_point()) return fmt::format("float {}", v->get());
  if (auto v = node.as_boolean()) return fmt::format("bool {}", v->get());
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  return "a date or time";
}

// Sets the field from the node, or returns false when the node has the wrong type.
bool assign(const FieldSpec& spec, const toml::node& node, const std::string& value_at) {
  struct Assigner {
    const FieldSpec& spec;
    const toml::node& node;
    const std::string& value_at;
    bool operator()(bool* v) const { return node.is_boolean() && (*v = *node.value<bool>(), true); }
    bool operator()(int64_t* v) const {
      return node.is_integer() && (*v = *node.value<int64_t>(), true);
    }
    bool operator()(double* v) const {
      return node.is_number() && (*v = *node.value<double>(), true);
    }
    bool operator()(std::optional<int64_t>* v) const {
      return node.is_integer() && (*v = node.value<int64_t>(), true);
    }
    bool operator()(std::optional<double>* v) const {
      return node.is_number() && (*v = node.value<double>(), true);
    }
    bool operator()(std::vector<int64_t>* v) const {
      const toml::array* array = node.as_array();
      if (!array) return false;
      std::vector<int64_t> values;
      for (const auto& item : *array) {
        if (!item.is_integer()) return false;
        values.push_back(*item.value<int64_t>());
      }
      *v = std::move(values);
      return true;
    }
    bool operator()(std::vector<std::string>* v) const {
      if (node.is_string()) {  // torchtitan's list[str] | str: a comma-separated string
        *v = split_list(*node.value<std::string>(), ',');
        return true;
      }
      auto strings = string_items(node);
      if (!strings) return false;
      *v = std::move(*strings);
      return true;
    }
    bool operator()(StringLists* v) const {
      const toml::array* array = node.as_array();
      if (!array) return false;
      StringLists lists;
      for (const auto& item : *array) {
        auto strings = string_items(item);
        if (!strings) return false;
        lists.push_back(std::move(*strings));
      }
      *v = std::move(lists);
      return true;
    }
    static std::optional<std::vector<std::string>> string_items(const toml::node& n) {
      const toml::array* array = n.as_array();
      if (!array) return std::nullopt;
      std::vector<std::string> items;
      for (const auto& item : *array) {
        if (!item.is_string()) return std::nullopt;
        items.push_back(*item.value<std::string>());
      }
      return items;
    }
    bool operator()(std::string*) const { return set_text(); }
    bool operator()(const EnumTarget&) const { return set_text(); }
    bool set_text() const {
      if (!node.is_string()) return false;
      set_choice(spec, *node.value<std::string>(), value_at);
      return true;
    }
  };
  return std::visit(Assigner{spec, node, value_at}, spec.target);
}

// `key_at` and `value_at` are the file:line:col of the key and of its value.
void apply_key(const std::string& section, const std::string& key, const toml::node& node,
               const std::string& key_at, const std::string& value_at,
               std::vector<FieldSpec>& fields) {
  for (auto& spec : fields) {
    if (spec.section != section || spec.key != key) continue;
    if (!assign(spec, node, value_at)) {
      throw ConfigError(
          value_at,
          fmt::format("{}: expected {}, got {}", spec.name(), spec.type_name(), describe(node)),
          fmt::format("write it as {} = {}", key, example_value(spec)));
    }
    check_field_value(spec, value_at);
    *spec.toml_location = key_at;
    return;
  }
  std::string guess = suggest_field_name(section + "." + key, fields);
  throw ConfigError(key_at, fmt::format("unknown key {}.{}", section, key),
                    guess.empty() ? fmt::format("valid keys of [{}] are listed by --help", section)
                                  : fmt::format("did you mean {}?", guess));
}

}  // namespace

namespace {

// toml++ parses nested tables, arrays and dotted keys recursively: a header with 100,000 dotted
// parts overflows the stack (SIGSEGV). A config needs a depth of 3 at most, so anything past
// kMaxTomlNesting is refused before toml++ sees it: brackets and braces nested outside strings,
// and dots in a key (a [header] line, or the text before a key's '=').
constexpr int kMaxTomlNesting = 32;

void check_toml_nesting(const std::string& text, const std::string& source) {
  int depth = 0, dots = 0, line = 1, column = 0;
  bool in_key = true;  // at a line's start, until '=' (dots there are key parts)
  std::string quote;   // the delimiter of the string being read (one or three quote characters)
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      ++line, column = 0, dots = 0, in_key = quote.empty() && depth == 0;
      continue;
    }
    if (!quote.empty()) {
      if (c == '\\' && quote[0] == '"') {
        ++i, ++column;
      } else if (text.compare(i, quote.size(), quote) == 0) {
        i += quote.size() - 1, column += static_cast<int>(quote.size()) - 1;
        quote.clear();
      }
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      quote = text.compare(i, 3, std::string(3, c)) == 0 ? std::string(3, c) : std::string(1, c);
      i += quote.size() - 1, column += static_cast<int>(quote.size()) - 1;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '=') {
      in_key = false;
    } else if (c == '.' && in_key) {
      ++dots;
    }
    if (depth > kMaxTomlNesting || dots >= kMaxTomlNesting) {
      throw ConfigError(fmt::format("{}:{}:{}", source, line, column),
                        fmt::format("nested more than {} levels deep", kMaxTomlNesting),
                        "a titan-train config has [section] headers and key = value lines");
    }
  }
}

}  // namespace

namespace {

// toml++ tables iterate in key order; problems are reported in file order instead.
std::vector<toml::key> keys_in_file_order(const toml::table& table) {
  std::vector<toml::key> keys;
  for (auto&& [key, node] : table) keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [](const toml::key& a, const toml::key& b) {
    const auto &pa = a.source().begin, &pb = b.source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return keys;
}

// Whether `name` is a section, or the start of one ("quantize", "quantize.linear").
bool is_section_or_parent(const std::string& name, const std::vector<std::string>& sections) {
  for (const auto& s : sections) {
    if (s == name || s.rfind(name + ".", 0) == 0) return true;
  }
  return false;
}

class TomlApplier {
 public:
  TomlApplier(Config& config, std::string source)
      : fields_(config_fields(config)), sections_(config_sections()), source_(std::move(source)) {}

  void apply_root(const toml::table& root) {
    for (const auto& key : keys_in_file_order(root)) {
      const std::string name(key.str());
      const std::string at = where(source_, key.source());
      const auto* table = root.get(key)->as_table();
      if (!table) {
        std::string guess = suggest_field_name(name, fields_);
        throw ConfigError(
            at, fmt::format("key '{}' must be inside a [section]", name),
            guess.empty() ? "see --help for the sections" : fmt::format("did you mean {}?", guess));
      }
      if (!is_section_or_parent(name, sections_)) unknown_section(name, at);
      apply_table(name, *table);
    }
  }

 private:
  // The keys of section `section` (or of a parent of sections, which holds tables only).
  void apply_table(const std::string& section, const toml::table& table) {
    const bool is_section =
        std::find(sections_.begin(), sections_.end(), section) != sections_.end();
    for (const auto& key : keys_in_file_order(table)) {
      const toml::node& node = *table.get(key);
      const std::string name = section + "." + std::string(key.str());
      const std::string at = where(source_, key.source());
      if (node.is_table() && is_section_or_parent(name, sections_)) {
        apply_table(name, *node.as_table());
      } else if (is_section) {
        apply_key(section, std::string(key.str()), node, at, where(source_, node.source()),
                  fields_);
      } else {
        unknown_section(name, at);
      }
    }
  }

  [[noreturn]] void unknown_section(const std::string& name, const std::string& at) const {
    std::string guess = closest_match(name, sections_);
    throw ConfigError(at, fmt::format("unknown section [{}]", name),
                      guess.empty() ? "valid sections: " + join_quoted(sections_)
                                    : fmt::format("did you mean [{}]?", guess));
  }

  std::vector<FieldSpec> fields_;
  std::vector<std::string> sections_;
  std::string source_;
};

}  // namespace

void apply_toml(Config& config, const std::string& text, const std::string& source) {
  check_toml_nesting(text, source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    throw ConfigError(where(source, err.source()), std::string(err.description()),
                      "fix the TOML syntax at that position");
  }
  TomlApplier(config, source).apply_root(root);
}

void apply_toml_file(Config& config, const std::string& path) {
  std::string text;
  try {
    text = read_file(path, kMaxTextFileBytes);
  } catch (const std::system_error& e) {
    if (e.code().value() == EFBIG) {
      throw ConfigError(path, "config file larger than 4 MiB",
                        "a config is a few kilobytes; check that --config names the TOML file");
    }
    throw ConfigError(path, "cannot open config file: " + e.code().message(),
                      "check the path; configs/ holds example files");
  }
  apply_toml(config, text, path);
}

}  // namespace titan
