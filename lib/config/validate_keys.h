// The checks behind each key's kind (schema.h, KeyKind) and torchtitan's own rules on values
// (internal to lib/config; validate() and config_warnings() call them).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace titan {

// "file:line:col: section.key" when the TOML file set the key, else "section.key".
std::string key_location(const Config& config, const std::string& key);

// Throws ConfigError for a refused key at a value other than its default, naming the key (and its
// file:line:col), the value and what to use instead.
void check_key_kinds(const Config& config);

// torchtitan's rules on values of keys that work: refused flavors, checkpoint keys that need
// others (create_seed_checkpoint needs checkpoint.enable, last_save_in_hf needs
// last_save_model_only), exclude_from_loading's names, save_config_file's place, validation.
void check_torchtitan_keys(const Config& config);

// One line per key that has no effect here and is not at its default: its value and why.
std::vector<std::string> key_kind_warnings(const Config& config);

}  // namespace titan
