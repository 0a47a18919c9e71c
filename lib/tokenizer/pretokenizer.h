// tokenizer.json's pre-tokenizers that titan implements exactly: Sequence, Split (string or regex
// pattern, every behavior, invert), ByteLevel (add_prefix_space, use_regex: GPT-2's pattern),
// Digits, Whitespace, WhitespaceSplit, CharDelimiterSplit, Metaspace. The others (BertPreTokenizer,
// Punctuation, UnicodeScripts, FixedLength) are a ConfigError naming the component and the file.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tokenizer/pipeline_stages.h"

namespace titan {

// The pre-tokenizer described by `spec` (a tokenizer.json "pre_tokenizer" object).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec,
                                                 const std::string& where);

// HF's ByteLevel pre-tokenizer (as the vocab.json + merges.txt fallback builds it).
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);

}  // namespace titan
