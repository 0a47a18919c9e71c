// argv -> CliRequest. Flags are normalized to --name=value first (so "--x -1" works and a bare
// boolean flag means true), then parsed with cxxopts, then applied in order after the TOML file.
#include <fmt/format.h>

#include <algorithm>
#include <cxxopts.hpp>

#include "config/field_io.h"
#include "config/loader.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

const std::vector<std::string> kActionFlags = {"help", "version", "print-config"};
const std::vector<std::string> kConfigFileFlags = {"config", "job.config_file"};

bool contains(const std::vector<std::string>& items, const std::string& s) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

const FieldSpec* find_field(const std::vector<FieldSpec>& fields, const std::string& name) {
  for (auto& f : fields) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> known_flag_names(const std::vector<FieldSpec>& fields) {
  std::vector<std::string> names = kActionFlags;
  names.insert(names.end(), kConfigFileFlags.begin(), kConfigFileFlags.end());
  for (auto& f : fields) names.push_back(f.name());
  return names;
}

[[noreturn]] void unknown_flag(const std::string& arg, const std::string& name,
                               const std::vector<FieldSpec>& fields) {
  std::string guess = closest_match(name, known_flag_names(fields));
  // Same key in a section the user did not write: "--steps" -> "--training.steps".
  for (auto& f : fields) {
    if (f.key == name) guess = f.name();
  }
  throw ConfigError("command line", fmt::format("unknown option '{}'", arg),
                    guess.empty() ? "run titan-train --help for the list of options"
                                  : fmt::format("did you mean --{}?", guess));
}

// Rewrites argv into "--name=value" tokens, checking each name against the field table.
std::vector<std::string> normalize(const std::vector<std::string>& args,
                                   const std::vector<FieldSpec>& fields) {
  std::vector<std::string> out = {args.empty() ? "titan-train" : args[0]};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h") {
      out.push_back("--help");
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      throw ConfigError("command line", fmt::format("unexpected argument '{}'", arg),
                        "options look like --section.key value; see --help");
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::replace(name.begin(), name.end(), '-', '_');  // --job.config-file works too
    if (name == "print_config") name = "print-config";
    if (contains(kActionFlags, name)) {
      out.push_back("--" + name);
      continue;
    }
    const FieldSpec* spec = find_field(fields, name);
    if (!spec && !contains(kConfigFileFlags, name)) unknown_flag(arg, name, fields);
    if (eq != std::string::npos) {
      out.push_back("--" + name + "=" + arg.substr(eq + 1));
      continue;
    }
    bool is_bool = spec && std::holds_alternative<bool*>(spec->target);
    bool next_is_value =
        i + 1 < args.size() && (!is_bool || args[i + 1] == "true" || args[i + 1] == "false");
    if (is_bool && !next_is_value) {
      out.push_back("--" + name + "=true");
    } else if (next_is_value) {
      out.push_back("--" + name + "=" + args[++i]);
    } else {
      throw ConfigError("command line", fmt::format("option '{}' needs a value", arg),
                        fmt::format("write {} VALUE or {}=VALUE", arg, arg));
    }
  }
  return out;
}

cxxopts::Options make_parser(const std::vector<FieldSpec>& fields) {
  cxxopts::Options options("titan-train", "Llama 3 training for people who debug numerics");
  auto adder = options.add_options();
  for (auto& flag : kActionFlags) adder(flag, "", cxxopts::value<bool>());
  for (auto& flag : kConfigFileFlags) adder(flag, "", cxxopts::value<std::string>());
  for (auto& f : fields) adder(f.name(), f.help, cxxopts::value<std::string>());
  return options;
}

}  // namespace

void apply_override(Config& config, const std::string& name, const std::string& value) {
  auto fields = config_fields(config);
  const FieldSpec* spec = find_field(fields, name);
  if (!spec) unknown_flag("--" + name, name, fields);
  set_field_from_text(*spec, value, "command line: --" + name);
}

CliRequest parse_command_line(const std::vector<std::string>& args) {
  Config scratch;
  auto fields = config_fields(scratch);
  std::vector<std::string> tokens = normalize(args, fields);
  std::vector<const char*> argv;
  for (auto& t : tokens) argv.push_back(t.c_str());

  auto options = make_parser(fields);
  CliRequest request;
  std::vector<std::pair<std::string, std::string>> overrides;
  try {
    auto result = options.parse(static_cast<int>(argv.size()), argv.data());
    if (result.count("help"))
      request.action = CliAction::kHelp;
    else if (result.count("version"))
      request.action = CliAction::kVersion;
    else if (result.count("print-config"))
      request.action = CliAction::kPrintConfig;
    for (auto& kv : result.arguments()) {
      if (contains(kConfigFileFlags, kv.key())) {
        request.config_file = kv.value();
      } else if (!contains(kActionFlags, kv.key())) {
        overrides.emplace_back(kv.key(), kv.value());
      }
    }
  } catch (const cxxopts::exceptions::exception& e) {
    throw ConfigError("command line", e.what(), "see titan-train --help");
  }
  if (request.action == CliAction::kHelp || request.action == CliAction::kVersion) return request;

  if (!request.config_file.empty()) apply_toml_file(request.config, request.config_file);
  for (auto& [name, value] : overrides) apply_override(request.config, name, value);
  validate(request.config);
  return request;
}

}  // namespace titan
