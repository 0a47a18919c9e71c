// The model families titan-train trains, by the name model.name gives (torchtitan's). Adding a
// family: its folder under lib/ implementing model/model.h, and one line of this registry.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"
#include "model/model_args.h"

namespace titan {

// The registered families' names, in registry order.
std::vector<std::string> model_families();

// The module of `args`' family (args.family) and shape, its parameters made as `memory` says and
// not yet initialized (init_weights). Throws std::invalid_argument naming the registered
// families for a family not among them (the config's model.name is checked before this).
Model build_model(const ModelArgs& args, const ParamMemory& memory = {});

}  // namespace titan
