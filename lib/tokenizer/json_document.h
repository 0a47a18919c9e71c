// The tokenizer files' JSON as a document (nlohmann's types), read by the project's one JSON
// reader (util/json_cursor.h), the one that reads config.json, model.safetensors.index.json and
// safetensors headers: every JSON file of a Hugging Face folder meets the same syntax rules and
// its errors the same wording.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace titan {

// The document `text` holds: objects, arrays, strings (valid UTF-8), numbers (non-negative
// integers as unsigned, negative ones as signed, up to 64 bits; any other number as a double),
// true, false, null. A member given twice keeps its last value, as nlohmann's parser and
// serde_json's maps do. Requires: `text` nested at most a few dozen levels (the caller bounds
// it; building recurses once per level). Throws JsonSyntaxError at the offending column.
template <class Document>
Document parse_json_document(const std::string& text);

extern template nlohmann::json parse_json_document<nlohmann::json>(const std::string&);
extern template nlohmann::ordered_json parse_json_document<nlohmann::ordered_json>(
    const std::string&);

}  // namespace titan
