#include "tokenizer/json_spec.h"

#include <fmt/format.h>

#include "util/error.h"

namespace titan {

std::string json_where(const std::string& where, const std::string& key) {
  return where + "." + key;
}

const Json& json_member(const Json& obj, const std::string& key) {
  static const Json null_value;
  if (!obj.is_object()) return null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

std::string json_string(const Json& obj, const std::string& key, const std::string& where) {
  const Json& v = json_member(obj, key);
  if (!v.is_string()) {
    throw ConfigError(
        json_where(where, key),
        fmt::format("expected a string, found {}", v.is_null() ? "nothing" : v.type_name()),
        "check the tokenizer file");
  }
  return v.get<std::string>();
}

std::optional<std::string> json_optional_string(const Json& obj, const std::string& key,
                                                const std::string& where) {
  const Json& v = json_member(obj, key);
  if (v.is_null()) return std::nullopt;
  return json_string(obj, key, where);
}

bool json_bool(const Json& obj, const std::string& key, bool fallback, const std::string& where) {
  const Json& v = json_member(obj, key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) {
    throw ConfigError(json_where(where, key),
                      fmt::format("expected true or false, found {}", v.type_name()),
                      "check the tokenizer file");
  }
  return v.get<bool>();
}

std::string json_type(const Json& spec, const std::string& where) {
  if (!spec.is_object()) {
    throw ConfigError(where, fmt::format("expected an object, found {}", spec.type_name()),
                      "check the tokenizer file");
  }
  return json_string(spec, "type", where);
}

void unsupported_component(const std::string& kind, const std::string& type,
                           const std::string& where) {
  throw ConfigError(
      where, fmt::format("the {} \"{}\" is not implemented by titan-train's tokenizer", kind, type),
      "titan-train reproduces Hugging Face tokenizers exactly or refuses the file; "
      "lib/tokenizer/tokenizer_loader.h lists the components it implements");
}

}  // namespace titan
