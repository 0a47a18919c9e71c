// argv -> CliRequest, parsed by cxxopts with every field of the table registered as an option.
//
// cxxopts does the tokenizing ("--name value", "--name=value", a bare boolean flag meaning true).
// What it cannot know is checked on its result, in argument order: unknown options (with a
// did-you-mean), stray arguments, a value that is really the next flag, and "--flag false" for a
// bare boolean (cxxopts leaves "false" as a positional argument after an implicit value).
#include <fmt/format.h>

#include <algorithm>
#include <cxxopts.hpp>
#include <set>

#include "config/field_io.h"
#include "config/loader.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/utf8.h"

namespace titan {
namespace {

constexpr const char* kPositional = "positional";
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

bool is_bool(const FieldSpec* spec) { return spec && std::holds_alternative<bool*>(spec->target); }

std::vector<std::string> non_field_flags() {
  std::vector<std::string> names = kActionFlags;
  names.insert(names.end(), kConfigFileFlags.begin(), kConfigFileFlags.end());
  return names;
}

[[noreturn]] void unknown_flag(const std::string& arg, const std::vector<FieldSpec>& fields) {
  const std::string name = arg.substr(arg.find_first_not_of('-'));
  const std::string guess =
      suggest_field_name(name.substr(0, name.find('=')), fields, non_field_flags());
  throw ConfigError("command line", fmt::format("unknown option '{}'", arg),
                    guess.empty() ? "run titan-train --help for the list of options"
                                  : fmt::format("did you mean --{}?", guess));
}

cxxopts::Options make_parser(const std::vector<FieldSpec>& fields) {
  cxxopts::Options options("titan-train", "Llama 3 training for people who debug numerics");
  options.allow_unrecognised_options();
  auto adder = options.add_options();
  adder("h,help", "", cxxopts::value<bool>());
  adder("version", "", cxxopts::value<bool>());
  adder("print-config", "", cxxopts::value<bool>());
  for (auto& flag : kConfigFileFlags) adder(flag, "", cxxopts::value<std::string>());
  for (auto& f : fields) {
    if (contains(kConfigFileFlags, f.name())) continue;  // --job.config_file names the file
    if (is_bool(&f)) {
      adder(f.name(), f.help, cxxopts::value<std::string>()->implicit_value("true"));
    } else {
      adder(f.name(), f.help, cxxopts::value<std::string>());
    }
  }
  adder(kPositional, "", cxxopts::value<std::vector<std::string>>());
  options.parse_positional({kPositional});
  return options;
}

// A value that is really the next option ("--job.description --debug.deterministic") means the
// flag before it was given no value.
void refuse_flag_as_value(const std::string& name, const std::string& value,
                          const std::vector<FieldSpec>& fields) {
  if (value.rfind("--", 0) != 0) return;
  const std::string next = value.substr(2, value.find('=') - 2);
  if (find_field(fields, next) || contains(non_field_flags(), next)) {
    throw ConfigError("command line", fmt::format("--{} needs a value", name),
                      fmt::format("write --{} VALUE or --{}=VALUE before {}", name, name, value));
  }
}

// The flags written bare ("--debug.deterministic", no "="), whose next argument may be their value.
std::set<std::string> bare_flags(const std::vector<std::string>& args) {
  std::set<std::string> names;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) == 0 && args[i].find('=') == std::string::npos) {
      names.insert(args[i].substr(2));
    }
  }
  return names;
}

bool is_bool_spelling(const std::string& text) {
  bool ignored = false;
  return parse_bool_text(text, ignored);
}

}  // namespace

void apply_override(Config& config, const std::string& name, const std::string& value) {
  auto fields = config_fields(config);
  const FieldSpec* spec = find_field(fields, name);
  if (!spec) unknown_flag("--" + name, fields);
  if (!is_valid_utf8(value)) {
    // config.toml and fingerprint.log record every value as TOML text, which is UTF-8.
    throw ConfigError("command line: --" + name, "the value is not valid UTF-8",
                      "give names and descriptions in UTF-8 (for a folder, rename it: titan-train "
                      "records every value in config.toml, which TOML requires to be UTF-8)");
  }
  set_field_from_text(*spec, value, "command line: --" + name);
}

CliRequest parse_command_line(const std::vector<std::string>& args) {
  Config scratch;
  const auto fields = config_fields(scratch);
  auto options = make_parser(fields);
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  if (argv.empty()) argv.push_back("titan-train");

  cxxopts::ParseResult result;
  try {
    result = options.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::missing_argument&) {
    const std::string& last = args.back();
    throw ConfigError("command line", fmt::format("option '{}' needs a value", last),
                      fmt::format("write {} VALUE or {}=VALUE", last, last));
  } catch (const cxxopts::exceptions::exception& e) {
    throw ConfigError("command line", e.what(), "see titan-train --help");
  }
  for (const auto& arg : result.unmatched()) {
    if (arg.rfind("-", 0) == 0) unknown_flag(arg, fields);
  }

  CliRequest request;
  const auto bare = bare_flags(args);
  std::vector<std::pair<std::string, std::string>> overrides;
  std::string previous_bool;  // a bare boolean flag just parsed, which a "false" may follow
  for (const auto& kv : result.arguments()) {
    const std::string& key = kv.key();
    if (key == kPositional) {
      if (previous_bool.empty() || !is_bool_spelling(kv.value())) {
        throw ConfigError("command line", fmt::format("unexpected argument '{}'", kv.value()),
                          "options look like --section.key value; see --help");
      }
      overrides.back().second = kv.value();
      previous_bool.clear();
      continue;
    }
    previous_bool = is_bool(find_field(fields, key)) && bare.count(key) ? key : "";
    if (key == "help") {
      request.action = CliAction::kHelp;
    } else if (key == "version" && request.action != CliAction::kHelp) {
      request.action = CliAction::kVersion;
    } else if (key == "print-config" && request.action == CliAction::kTrain) {
      request.action = CliAction::kPrintConfig;
    } else if (contains(kConfigFileFlags, key)) {
      refuse_flag_as_value(key, kv.value(), fields);
      if (!request.config_file.empty()) {
        throw ConfigError(
            "command line",
            fmt::format("--{} given twice ({} and {})", key, request.config_file, kv.value()),
            "give one config file; override single keys with --section.key value");
      }
      if (kv.value().empty()) {
        throw ConfigError("command line", fmt::format("--{} is empty", key),
                          "write --config FILE, e.g. --config configs/debug_model.toml");
      }
      request.config_file = kv.value();
    } else if (!contains(kActionFlags, key)) {
      refuse_flag_as_value(key, kv.value(), fields);
      overrides.emplace_back(key, kv.value());
    }
  }
  if (request.action == CliAction::kHelp || request.action == CliAction::kVersion) return request;

  if (!request.config_file.empty()) apply_toml_file(request.config, request.config_file);
  for (auto& [name, value] : overrides) apply_override(request.config, name, value);
  resolve_deprecated_keys(request.config);
  validate(request.config);
  return request;
}

}  // namespace titan
