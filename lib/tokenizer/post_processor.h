// tokenizer.json's post-processors (applied by HF's encode with add_special_tokens=true):
// TemplateProcessing (its "single" template), BertProcessing and RobertaProcessing ([cls] $A
// [sep]), ByteLevel (offsets only: no change to ids) and Sequence. Others are a ConfigError.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tokenizer/pipeline_stages.h"

namespace titan {

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& spec,
                                                   const std::string& where);

}  // namespace titan
