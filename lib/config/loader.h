// Turning a TOML file and command-line flags into a validated Config.
//
// Precedence: CLI > TOML > defaults. Every failure throws ConfigError (exit code 2) naming the
// file:line:col or the flag, and suggesting the fix, before any model or data is built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace titan {

enum class CliAction { kTrain, kHelp, kPrintConfig, kVersion };

struct CliRequest {
  CliAction action = CliAction::kTrain;
  Config config;            // resolved and validated (when action is kTrain or kPrintConfig)
  std::string config_file;  // "" when no --config was given
};

// Parses argv (argv[0] is the program name). Throws ConfigError.
CliRequest parse_command_line(const std::vector<std::string>& args);

// Applies the TOML document in `text` to `config`; `source` names it in errors.
void apply_toml(Config& config, const std::string& text, const std::string& source);

// Reads and applies a TOML file. A missing or unreadable file is a ConfigError with the reason.
void apply_toml_file(Config& config, const std::string& path);

// Applies one "--section.key value" override; `value` is parsed according to the key's type.
void apply_override(Config& config, const std::string& name, const std::string& value);

// Cross-field checks that a single key cannot make (batch divisibility, unsupported modes...).
// Errors name the key and, when the TOML file set it, its file:line:col.
void validate(const Config& config);

// Settings that are valid but probably not what the user meant (a dataset_path the synthetic
// dataset ignores), one message each, for the start-of-run log.
std::vector<std::string> config_warnings(const Config& config);

// The resolved config as a TOML document that apply_toml reads back to the same Config.
std::string to_toml(const Config& config);

// The resolved config as JSON, one object per section, nested as torchtitan's JobConfig is
// ("training": {..., "dataloader": {...}}): job.print_config and job.save_config_file.
std::string to_json(const Config& config);

// torchtitan's deprecated aliases: a set model.tokenizer_path replaces model.hf_assets_path
// (config_warnings then says so).
void resolve_deprecated_keys(Config& config);

// --help: every key with its type, default, kind and help, from the field table.
std::string help_text();

}  // namespace titan
