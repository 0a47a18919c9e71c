// Typed reads of tokenizer JSON (tokenizer.json, tokenizer_config.json) that fail as ConfigError
// naming the file and the JSON path of the value, never with the JSON library's own message.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace titan {

using Json = nlohmann::json;

// "file: path.to.value" for messages.
std::string json_where(const std::string& where, const std::string& key);

// The member `key` of the object `obj` (null when absent).
const Json& json_member(const Json& obj, const std::string& key);
// A required string member.
std::string json_string(const Json& obj, const std::string& key, const std::string& where);
// An optional string member (absent or null: nullopt).
std::optional<std::string> json_optional_string(const Json& obj, const std::string& key,
                                                const std::string& where);
// A boolean member; absent or null gives `fallback`.
bool json_bool(const Json& obj, const std::string& key, bool fallback, const std::string& where);
// The "type" of a component object.
std::string json_type(const Json& spec, const std::string& where);

// A component titan does not implement: ConfigError naming it and the file.
[[noreturn]] void unsupported_component(const std::string& kind, const std::string& type,
                                        const std::string& where);

}  // namespace titan
