// Reading tokenizer.json (and the other JSON files of a tokenizer folder) into titan's pipeline.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/json_spec.h"

namespace titan {

// The JSON document in the regular file `path` of at most `max_bytes`, nested at most
// kMaxTokenizerJsonDepth deep. Throws ConfigError naming the file (and line:column for a syntax
// error; FileRefused for a non-regular file).
Json read_json_file(const std::string& path, uint64_t max_bytes);
// The same with objects in file order (tokenizer_config.json: torchtitan adds its
// added_tokens_decoder entries in file order, which decides new tokens' ids). Lookups in such
// objects are linear: for small files only.
nlohmann::ordered_json read_ordered_json_file(const std::string& path, uint64_t max_bytes);

// The pipeline described by the tokenizer.json document `doc` read from `path`.
HfPipeline pipeline_from_tokenizer_json(const Json& doc, const std::string& path);

}  // namespace titan
