#include "config/field_io.h"

#include <fmt/format.h>

#include <algorithm>
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

// The key's default, as TOML text, for hints ("" when unset by default).
std::string default_value_text(const FieldSpec& spec) {
  Config defaults;
  for (auto& f : config_fields(defaults)) {
    if (f.name() == spec.name()) return f.value_as_toml();
  }
  return "";
}

std::string default_hint(const FieldSpec& spec) {
  std::string value = default_value_text(spec);
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

bool parse_bool(const std::string& text, bool& out) {
  if (text == "true" || text == "True" || text == "1") {
    out = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "0") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace

void check_field_value(const FieldSpec& spec, const std::string& at) {
  if (!spec.choices.empty()) {
    const std::string& value = *std::get<std::string*>(spec.target);
    if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end()) {
      std::string guess = closest_match(value, spec.choices);
      throw ConfigError(at,
                        fmt::format("{}: \"{}\" is not allowed; allowed values: {}", spec.name(),
                                    value, join_quoted(spec.choices)),
                        guess.empty() ? "" : fmt::format("did you mean \"{}\"?", guess));
    }
  }
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
  bool ok = true;
  if (auto p = std::get_if<bool*>(&spec.target)) {
    ok = parse_bool(text, **p);
  } else if (auto p = std::get_if<int64_t*>(&spec.target)) {
    ok = parse_int(text, **p);
  } else if (auto p = std::get_if<double*>(&spec.target)) {
    ok = parse_double(text, **p);
  } else if (auto p = std::get_if<std::string*>(&spec.target)) {
    **p = text;
  } else if (auto p = std::get_if<std::optional<int64_t>*>(&spec.target)) {
    int64_t v = 0;
    ok = parse_int(text, v);
    if (ok) **p = v;
  } else if (auto p = std::get_if<std::optional<double>*>(&spec.target)) {
    double v = 0;
    ok = parse_double(text, v);
    if (ok) **p = v;
  }
  if (!ok && is_integer_field(spec) && is_integer_text(text)) {  // well-formed, beyond int64
    throw ConfigError(
        at,
        fmt::format("{} = {} is out of range: it must be {}", spec.name(), text, bound_text(spec)),
        default_hint(spec));
  }
  if (!ok) {
    throw ConfigError(
        at, fmt::format("{}: expected {}, got \"{}\"", spec.name(), spec.type_name(), text),
        fmt::format("for example --{}={}", spec.name(), example_value(spec)));
  }
  check_field_value(spec, at);
  if (spec.toml_location) spec.toml_location->clear();  // a flag now holds the value
}

std::string example_value(const FieldSpec& spec) {
  if (!spec.choices.empty()) return toml_quote(spec.choices.front());
  if (!spec.has_value()) return spec.type_name() == "integer" ? "42" : "0.5";
  return spec.value_as_toml();
}

}  // namespace titan
