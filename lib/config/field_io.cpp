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

std::string bound_text(const FieldSpec& spec) {
  std::string lower =
      spec.min ? fmt::format("{} {}", spec.min_exclusive ? ">" : ">=", *spec.min) : "";
  std::string upper = spec.max ? fmt::format("<= {}", *spec.max) : "";
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
  if (std::isnan(*value)) {
    throw ConfigError(at, fmt::format("{}: nan is not a valid value", spec.name()));
  }
  bool too_low = spec.min && (spec.min_exclusive ? *value <= *spec.min : *value < *spec.min);
  bool too_high = spec.max && *value > *spec.max;
  if (too_low || too_high) {
    throw ConfigError(at, fmt::format("{} = {} is out of range: it must be {}", spec.name(),
                                      spec.value_as_toml(), bound_text(spec)));
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
  if (!ok) {
    throw ConfigError(
        at, fmt::format("{}: expected {}, got \"{}\"", spec.name(), spec.type_name(), text),
        fmt::format("for example --{}={}", spec.name(), example_value(spec)));
  }
  check_field_value(spec, at);
}

std::string example_value(const FieldSpec& spec) {
  if (!spec.choices.empty()) return toml_quote(spec.choices.front());
  if (!spec.has_value()) return spec.type_name() == "integer" ? "42" : "0.5";
  return spec.value_as_toml();
}

}  // namespace titan
