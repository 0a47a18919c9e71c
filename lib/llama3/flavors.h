// Llama 3's flavors: torchtitan v0.2.2's (models/llama3/__init__.py), and two of titan-train's
// own (tiny for unit tests, debugmodel_wide for the benchmark).
#pragma once

#include <string>
#include <vector>

#include "model/model_args.h"

namespace titan::llama3 {

// tiny, debugmodel, debugmodel_wide, 1B, 8B, 70B, 405B.
const std::vector<std::string>& flavors();

// The args of `flavor` (family "llama3"). Throws std::invalid_argument for another name.
ModelArgs flavor_args(const std::string& flavor);

}  // namespace titan::llama3
