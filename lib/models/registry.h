// The model families titan-train trains, by the name model.name gives (torchtitan's). Adding a
// family: its folder under lib/ implementing model/model.h, one line of this registry, and its
// names in config/model_catalog.cpp (test_models checks the two agree).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "model/model.h"
#include "model/model_args.h"

namespace titan {

// The registered families' names, in registry order.
std::vector<std::string> model_families();

// The flavors `family` builds. Throws std::invalid_argument for an unregistered family.
std::vector<std::string> family_flavors(const std::string& family);

// The args of `family`'s `flavor` (args.family set). Throws std::invalid_argument naming the
// choices for a family or flavor not registered (the config's model.name and model.flavor are
// checked against config/model_catalog.h before this).
ModelArgs flavor_args(const std::string& family, const std::string& flavor);

// The module of `args`' family (args.family) and shape, its parameters made as `memory` says and
// not yet initialized (init_weights). Throws std::invalid_argument naming the registered
// families for a family not among them.
Model build_model(const ModelArgs& args, const ParamMemory& memory = {});

// The model a config trains: its family's flavor, with training.seq_len as the RoPE table's
// length and model.dropout. Throws ConfigError for a family or flavor not registered (a config
// read without validate(), as a checkpoint's saved one).
ModelArgs model_args_for(const Config& config);

}  // namespace titan
