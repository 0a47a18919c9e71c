#include "config/field_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

std::optional<double> numeric_value(const FieldSpec& spec) {
  if (auto p = std::get_if<int64_t*>(&spec.target)) return static_cast<double>(**p);
  if (auto p = std::get_if<double*>(&spec.target)) return **p;
  if (auto p = std::get_if<std::optional<int64_t>*>(&spec.target)) {
    if (**p) return static_cast<double>(***p);
  }
  if (auto p = std::get_if<std::optional<double>*>(&spec.target)) return **p;
  return std::nullopt;
}

std::string default_hint(const FieldSpec& spec) {
  std::string value = default_value_of(spec);
  return value.empty() ? "" : fmt::format("the default is {} = {}", spec.key, value);
}

bool is_integer_field(const FieldSpec& spec) {
  return std::holds_alternative<int64_t*>(spec.target) ||
         std::holds_alternative<std::optional<int64_t>*>(spec.target);
}

std::string bound_number(const FieldSpec& spec, double bound) {
  if (is_integer_field(spec)) return std::to_string(static_cast<int64_t>(bound));
  return fmt::format("{}", bound);
}

bool parse_int(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

// An optional minus sign and at least one digit, nothing else.
bool is_integer_text(const std::string& text) {
  size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;
  return text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
}

bool parse_double(const std::string& text, double& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

void check_list(const FieldSpec& spec, const std::vector<int64_t>& values, const std::string& at) {
  for (int64_t v : values) {
    const auto value = static_cast<double>(v);
    bool too_low = spec.min && (spec.min_exclusive ? value <= *spec.min : value < *spec.min);
    bool too_high = spec.max && (spec.max_exclusive ? value >= *spec.max : value > *spec.max);
    if (too_low || too_high) {
      throw ConfigError(at,
                        fmt::format("{} = {}: {} is out of range: each must be {}", spec.name(),
                                    spec.value_as_toml(), v, bound_text(spec)),
                        "");
    }
  }
}

[[noreturn]] void refuse_choice(const FieldSpec& spec, const std::string& value,
                                const std::string& at) {
  std::string guess = closest_match(value, spec.choices);
  throw ConfigError(at,
                    fmt::format("{}: \"{}\" is not allowed; allowed values: {}", spec.name(), value,
                                join_quoted(spec.choices)),
                    guess.empty() ? "" : fmt::format("did you mean \"{}\"?", guess));
}

}  // namespace

bool parse_bool_text(const std::string& text, bool& out) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "1" || lower == "yes") {
    out = true;
    return true;
  }
  if (lower == "false" || lower == "0" || lower == "no") {
    out = false;
    return true;
  }
  return false;
}

void set_choice(const FieldSpec& spec, const std::string& text, const std::string& at) {
  if (auto p = std::get_if<std::string*>(&spec.target)) {
    **p = text;
    check_field_value(spec, at);
    return;
  }
  const auto& e = std::get<EnumTarget>(spec.target);
  for (size_t i = 0; i < e.names->size(); ++i) {
    if ((*e.names)[i] == text) return e.set(i);
  }
  refuse_choice(spec, text, at);
}

std::string bound_text(const FieldSpec& spec) {
  std::string lower =
      spec.min
          ? fmt::format("{} {}", spec.min_exclusive ? ">" : ">=", bound_number(spec, *spec.min))
          : "";
  std::string upper =
      spec.max
          ? fmt::format("{} {}", spec.max_exclusive ? "<" : "<=", bound_number(spec, *spec.max))
          : "";
  if (!lower.empty() && !upper.empty()) return lower + " and " + upper;
  return lower + upper;
}

void check_field_value(const FieldSpec& spec, const std::string& at) {
  if (auto p = std::get_if<std::string*>(&spec.target); p && !spec.choices.empty()) {
    if (std::find(spec.choices.begin(), spec.choices.end(), **p) == spec.choices.end()) {
      refuse_choice(spec, **p, at);
    }
  }
  if (auto p = std::get_if<std::vector<int64_t>*>(&spec.target)) return check_list(spec, **p, at);
  auto value = numeric_value(spec);
  if (!value) return;
  if (!std::isfinite(*value)) {
    throw ConfigError(
        at,
        fmt::format("{} = {} is not a finite number{}", spec.name(), spec.value_as_toml(),
                    bound_text(spec).empty() ? "" : "; it must be " + bound_text(spec)),
        default_hint(spec));
  }
  bool too_low = spec.min && (spec.min_exclusive ? *value <= *spec.min : *value < *spec.min);
  bool too_high = spec.max && (spec.max_exclusive ? *value >= *spec.max : *value > *spec.max);
  if (too_low || too_high) {
    throw ConfigError(at,
                      fmt::format("{} = {} is out of range: it must be {}", spec.name(),
                                  spec.value_as_toml(), bound_text(spec)),
                      default_hint(spec));
  }
}

void set_field_from_text(const FieldSpec& spec, const std::string& text, const std::string& at) {
  struct Parser {
    const std::string& text;
    bool operator()(bool* v) const { return parse_bool_text(text, *v); }
    bool operator()(int64_t* v) const { return parse_int(text, *v); }
    bool operator()(double* v) const { return parse_double(text, *v); }
    bool operator()(std::string*) const { return true; }  // set_choice below
    bool operator()(const EnumTarget&) const { return true; }
    bool operator()(std::optional<int64_t>* v) const {
      int64_t value = 0;
      if (!parse_int(text, value)) return false;
      *v = value;
      return true;
    }
    bool operator()(std::optional<double>* v) const {
      double value = 0;
      if (!parse_double(text, value)) return false;
      *v = value;
      return true;
    }
    bool operator()(std::vector<int64_t>* v) const {  // "1,2,3"; "" is the empty list
      std::vector<int64_t> values;
      for (const auto& item : split_list(text, ',')) {
        int64_t value = 0;
        if (!parse_int(item, value)) return false;
        values.push_back(value);
      }
      *v = std::move(values);
      return true;
    }
    bool operator()(std::vector<std::string>* v) const {  // "a,b"; "" is the empty list
      *v = split_list(text, ',');
      return true;
    }
    bool operator()(StringLists* v) const {  // "a,b;c": [["a", "b"], ["c"]]
      StringLists lists;
      for (const auto& part : split_list(text, ';')) lists.push_back(split_list(part, ','));
      *v = std::move(lists);
      return true;
    }
  };
  const bool is_text = std::holds_alternative<std::string*>(spec.target) ||
                       std::holds_alternative<EnumTarget>(spec.target);
  if (is_text) set_choice(spec, text, at);
  const bool ok = is_text || std::visit(Parser{text}, spec.target);
  if (!ok && is_integer_field(spec) && is_integer_text(text)) {  // well-formed, beyond int64
    throw ConfigError(
        at,
        fmt::format("{} = {} is out of range: it must be {}", spec.name(), text, bound_text(spec)),
        default_hint(spec));
  }
  if (!ok) {
    throw ConfigError(
        at, fmt::format("{}: expected {}, got \"{}\"", spec.name(), spec.type_name(), text),
        fmt::format("for example --{}={}", spec.name(),
                    std::holds_alternative<std::vector<int64_t>*>(spec.target)
                        ? "100,200"  // the flag's list form; example_value is TOML's
                        : example_value(spec)));
  }
  check_field_value(spec, at);
  if (spec.toml_location) spec.toml_location->clear();  // a flag now holds the value
}

std::string example_value(const FieldSpec& spec) {
  if (!spec.choices.empty()) return toml_quote(spec.choices.front());
  if (!spec.has_value()) return spec.type_name() == "integer" ? "42" : "0.5";
  if (std::holds_alternative<std::vector<int64_t>*>(spec.target)) return "[100, 200]";
  if (std::holds_alternative<std::vector<std::string>*>(spec.target)) return "[\"a\", \"b\"]";
  if (std::holds_alternative<StringLists*>(spec.target)) return "[[\"a\", \"b\"], [\"c\"]]";
  return spec.value_as_toml();
}

}  // namespace titan
