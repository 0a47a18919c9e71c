// torchtitan v0.2.2's DeepSeek-V3 flavors (models/deepseek_v3/__init__.py), after titan-train's
// tiny (for tests).
#pragma once

#include <string>
#include <vector>

#include "model/model_args.h"

namespace titan::deepseek_v3 {

// tiny, debugmodel, 16B, 236B, 671B.
const std::vector<std::string>& flavors();

// The args of a flavor (family "deepseek_v3", load balancing on, as torchtitan's deepseek_v3
// trains). Throws std::invalid_argument for another name.
ModelArgs flavor_args(const std::string& flavor);

}  // namespace titan::deepseek_v3
