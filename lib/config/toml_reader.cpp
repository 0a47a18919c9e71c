// TOML -> Config, with errors that point at file:line:col.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/field_io.h"
#include "config/loader.h"
#include "config/schema.h"
#include "util/error.h"
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
bool assign(const FieldSpec& spec, const toml::node& node) {
  const auto& target = spec.target;
  if (auto p = std::get_if<bool*>(&target)) {
    if (!node.is_boolean()) return false;
    **p = *node.value<bool>();
  } else if (auto p = std::get_if<int64_t*>(&target)) {
    if (!node.is_integer()) return false;
    **p = *node.value<int64_t>();
  } else if (auto p = std::get_if<double*>(&target)) {
    if (!node.is_floating_point() && !node.is_integer()) return false;
    **p = *node.value<double>();
  } else if (auto p = std::get_if<std::string*>(&target)) {
    if (!node.is_string()) return false;
    **p = *node.value<std::string>();
  } else if (auto p = std::get_if<std::optional<int64_t>*>(&target)) {
    if (!node.is_integer()) return false;
    **p = node.value<int64_t>();
  } else if (auto p = std::get_if<std::optional<double>*>(&target)) {
    if (!node.is_floating_point() && !node.is_integer()) return false;
    **p = node.value<double>();
  }
  return true;
}

std::vector<std::string> all_names(std::vector<FieldSpec>& fields) {
  std::vector<std::string> names;
  for (auto& f : fields) names.push_back(f.name());
  return names;
}

// "did you mean ..." for an unknown key: the same key in another section first, then typos.
std::string suggest_key(const std::string& section, const std::string& key,
                        std::vector<FieldSpec>& fields) {
  for (auto& f : fields) {
    if (f.key == key && f.section != section) return f.name();
  }
  return closest_match(section + "." + key, all_names(fields));
}

// `key_at` and `value_at` are the file:line:col of the key and of its value.
void apply_key(const std::string& section, const std::string& key, const toml::node& node,
               const std::string& key_at, const std::string& value_at,
               std::vector<FieldSpec>& fields) {
  for (auto& spec : fields) {
    if (spec.section != section || spec.key != key) continue;
    if (!assign(spec, node)) {
      throw ConfigError(
          value_at,
          fmt::format("{}: expected {}, got {}", spec.name(), spec.type_name(), describe(node)),
          fmt::format("write it as {} = {}", key, example_value(spec)));
    }
    check_field_value(spec, value_at);
    *spec.toml_location = key_at;
    return;
  }
  std::string guess = suggest_key(section, key, fields);
  throw ConfigError(key_at, fmt::format("unknown key {}.{}", section, key),
                    guess.empty() ? fmt::format("valid keys of [{}] are listed by --help", section)
                                  : fmt::format("did you mean {}?", guess));
}

}  // namespace

void apply_toml(Config& config, const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    throw ConfigError(where(source, err.source()), std::string(err.description()),
                      "fix the TOML syntax at that position");
  }
  auto fields = config_fields(config);
  auto sections = config_sections();
  // toml++ tables iterate in key order; report problems in file order instead.
  auto by_position = [](const toml::key& a, const toml::key& b) {
    const auto &pa = a.source().begin, &pb = b.source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  };
  std::vector<toml::key> section_keys;
  for (auto&& [section_key, node] : root) section_keys.push_back(section_key);
  std::sort(section_keys.begin(), section_keys.end(), by_position);
  for (const auto& section_key : section_keys) {
    std::string section(section_key.str());
    std::string at = where(source, section_key.source());
    auto* table = root.get(section_key)->as_table();
    if (!table) {
      std::string guess = suggest_key("", section, fields);
      throw ConfigError(
          at, fmt::format("key '{}' must be inside a [section]", section),
          guess.empty() ? "see --help for the sections" : fmt::format("did you mean {}?", guess));
    }
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      std::string guess = closest_match(section, sections);
      throw ConfigError(at, fmt::format("unknown section [{}]", section),
                        guess.empty() ? "valid sections: " + join_quoted(sections)
                                      : fmt::format("did you mean [{}]?", guess));
    }
    std::vector<toml::key> keys;
    for (auto&& [key, node] : *table) keys.push_back(key);
    std::sort(keys.begin(), keys.end(), by_position);
    for (const auto& key : keys) {
      const toml::node& node = *table->get(key);
      apply_key(section, std::string(key.str()), node, where(source, key.source()),
                where(source, node.source()), fields);
    }
  }
}

void apply_toml_file(Config& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(path, fmt::format("cannot open config file: {}", std::strerror(errno)),
                      "check the path; configs/ holds example files");
  }
  std::stringstream text;
  text << in.rdbuf();
  apply_toml(config, text.str(), path);
}

}  // namespace titan
