// tokenizer.json's normalizers that titan implements exactly: Sequence, Prepend, Replace (string
// or regex), Strip, ByteLevel, and the canonical normal forms NFD and NFC (normal_form.h: tables
// read off HF's own Unicode data). The compatibility forms (NFKD, NFKC), Lowercase,
// BertNormalizer, StripAccents, Precompiled and NMT need Unicode tables titan does not carry:
// building one of them is a ConfigError naming the component and the file.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tokenizer/pipeline_stages.h"

namespace titan {

// The normalizer described by `spec` (a tokenizer.json "normalizer" object). `where` names the
// file and the JSON path for errors.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec, const std::string& where);

}  // namespace titan
