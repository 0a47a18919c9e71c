#include "config/validate_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <algorithm>
#include <filesystem>

#include "config/loader.h"
#include "config/model_catalog.h"
#include "config/run_folder.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

bool is_default(const FieldSpec& f) {
  return (f.has_value() ? f.value_as_toml() : "") == default_value_of(f);
}

std::string value_text(const FieldSpec& f) { return f.has_value() ? f.value_as_toml() : "unset"; }

// model.name and model.flavor: an offered family and one of its offered flavors.
void check_model_choice(const Config& config) {
  const ModelConfig& m = config.model;
  const FamilyCatalog* family = find_family(m.name);
  if (family == nullptr) {  // the schema's choices let only catalog names through
    throw ConfigError(key_location(config, "model.name"),
                      fmt::format("\"{}\" is not a model family", m.name),
                      "use llama3, qwen3 or deepseek_v3");
  }
  if (family->family.refused()) {
    throw ConfigError(key_location(config, "model.name"),
                      fmt::format("\"{}\" {}", m.name, family->family.why), family->family.hint);
  }
  for (const CatalogEntry& flavor : family->flavors) {
    if (flavor.name != m.flavor) continue;
    if (!flavor.refused()) return;
    throw ConfigError(key_location(config, "model.flavor"),
                      fmt::format("{} flavor \"{}\" {}", m.name, m.flavor, flavor.why),
                      flavor.hint);
  }
  const std::vector<std::string> flavors = offered_flavors(*family);
  const std::string close = closest_match(m.flavor, flavors);
  throw ConfigError(
      key_location(config, "model.flavor"),
      fmt::format("\"{}\" is not a flavor of model.name \"{}\"", m.flavor, m.name),
      fmt::format("{}{}'s flavors: {}", close.empty() ? "" : "did you mean \"" + close + "\"? ",
                  m.name, fmt::join(flavors, ", ")));
}

void check_checkpoint_keys(const Config& config) {
  const CheckpointConfig& c = config.checkpoint;
  if (c.create_seed_checkpoint && !c.enable) {
    throw ConfigError(key_location(config, "checkpoint.create_seed_checkpoint"),
                      "writes a checkpoint, but checkpoint.enable is false",
                      "set checkpoint.enable = true");
  }
  if (c.last_save_in_hf && !c.last_save_model_only) {
    throw ConfigError(key_location(config, "checkpoint.last_save_in_hf"),
                      "a Hugging Face checkpoint holds the model only, but "
                      "checkpoint.last_save_model_only is false",
                      "set checkpoint.last_save_model_only = true");
  }
  const CatalogEntry* flavor = find_flavor(config.model.name, config.model.flavor);
  for (const char* key : {"checkpoint.initial_load_in_hf", "checkpoint.last_save_in_hf"}) {
    const bool on = std::string(key) == "checkpoint.initial_load_in_hf" ? c.initial_load_in_hf
                                                                        : c.last_save_in_hf;
    if (on && flavor && flavor->mixture_of_experts) {
      throw ConfigError(key_location(config, key),
                        fmt::format("{} {} is a mixture-of-experts model, whose Hugging Face "
                                    "checkpoints titan-train cannot read or write yet",
                                    config.model.name, config.model.flavor),
                        "use titan-train's own checkpoints: set it to false");
    }
  }
  if (c.initial_load_in_hf && !c.initial_load_model_only) {
    throw ConfigError(key_location(config, "checkpoint.initial_load_in_hf"),
                      "a Hugging Face checkpoint holds the model only, but "
                      "checkpoint.initial_load_model_only is false",
                      "set checkpoint.initial_load_model_only = true");
  }
  if (c.initial_load_in_hf && c.initial_load_path.empty() && config.model.hf_assets_path.empty()) {
    throw ConfigError(key_location(config, "checkpoint.initial_load_in_hf"),
                      "names no checkpoint: checkpoint.initial_load_path and "
                      "model.hf_assets_path are both empty",
                      "set checkpoint.initial_load_path to the Hugging Face checkpoint's folder");
  }
  static const std::vector<std::string> parts = {"model", "optimizer", "lr_scheduler", "dataloader",
                                                 "train_state"};
  for (const auto& part : c.exclude_from_loading) {
    if (std::find(parts.begin(), parts.end(), part) != parts.end()) continue;
    const std::string guess = closest_match(part, parts);
    throw ConfigError(key_location(config, "checkpoint.exclude_from_loading"),
                      fmt::format("\"{}\" is not a part of a checkpoint; the parts are {}", part,
                                  join_quoted(parts)),
                      guess.empty() ? "" : fmt::format("did you mean \"{}\"?", guess));
  }
}

// Whether `name` is a relative path strictly inside the dump folder.
bool inside_dump_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(name).lexically_normal();
  bool inside =
      path.is_relative() && !path.empty() && path.filename() != "" && path.begin()->string() != ".";
  for (const auto& part : path) inside = inside && part != "..";
  return inside;
}

void check_output_names(const Config& config) {
  const std::string& name = config.job.save_config_file;
  if (!name.empty() && !inside_dump_folder(name)) {
    throw ConfigError(key_location(config, "job.save_config_file"),
                      fmt::format("\"{}\" is not a file name inside job.dump_folder", name),
                      "name a file, e.g. save_config_file = \"job_config.json\"");
  }
  // The run's own files: writing the JSON there would replace its lock, metrics or checkpoints.
  const std::string own = name.empty() ? "" : RunFolder(config).own_use_of(name);
  if (!own.empty()) {
    throw ConfigError(key_location(config, "job.save_config_file"),
                      fmt::format("\"{}\" is the run's own: {}", name, own),
                      "name a file the run does not write, e.g. save_config_file = "
                      "\"job_config.json\"");
  }
  const std::pair<const char*, const std::string*> folders[] = {
      {"profiling.save_traces_folder", &config.profiling.save_traces_folder},
      {"profiling.save_memory_snapshot_folder", &config.profiling.save_memory_snapshot_folder},
      {"comm.save_traces_folder", &config.comm.save_traces_folder}};
  for (const auto& [key, folder] : folders) {
    if (inside_dump_folder(*folder)) continue;
    throw ConfigError(key_location(config, key),
                      fmt::format("\"{}\" is not a folder inside job.dump_folder", *folder),
                      "name a subfolder of the dump folder");
  }
}

void check_profiling(const Config& config) {
  const ProfilingConfig& p = config.profiling;
  if (p.enable_profiling && p.profiler_warmup + p.profiler_active > p.profile_freq) {
    throw ConfigError(key_location(config, "profiling.profile_freq"),
                      fmt::format("{} is shorter than profiler_warmup + profiler_active = {}",
                                  p.profile_freq, p.profiler_warmup + p.profiler_active),
                      "each profiling window (warmup, then recorded steps) must fit in "
                      "profile_freq steps");
  }
}

void check_validation(const Config& config) {
  const ValidationConfig& v = config.validation;
  if (v.enable && v.seq_len > config.training.seq_len) {
    throw ConfigError(key_location(config, "validation.seq_len"),
                      fmt::format("{} is longer than training.seq_len = {}: the model's rotary "
                                  "table covers the training length",
                                  v.seq_len, config.training.seq_len),
                      "validate on sequences no longer than the training ones");
  }
  if (config.validation.steps == 0) {
    throw ConfigError(key_location(config, "validation.steps"), "0 batches would measure nothing",
                      "use a positive number of batches, or -1 for the whole validation set");
  }
}

}  // namespace

void check_seed_checkpoint(const Config& config, int64_t world_size) {
  if (!config.checkpoint.create_seed_checkpoint || world_size == 1) return;
  throw ConfigError(key_location(config, "checkpoint.create_seed_checkpoint"),
                    fmt::format("creates the seed in one process; this run has {}", world_size),
                    "run it once without a launcher, then start the ranks from the seed");
}

std::string key_location(const Config& config, const std::string& key) {
  auto it = config.toml_locations.find(key);
  if (it == config.toml_locations.end() || it->second.empty()) return key;
  return it->second + ": " + key;
}

void check_key_kinds(const Config& config) {
  Config copy = config;
  for (const auto& f : config_fields(copy)) {
    if (f.kind != KeyKind::kRefused || is_default(f)) continue;
    throw ConfigError(key_location(config, f.name()),
                      fmt::format("set to {}, which titan-train does not implement; only "
                                  "torchtitan's default ({}) is accepted",
                                  value_text(f), default_value_of(f)),
                      f.note);
  }
}

void check_torchtitan_keys(const Config& config) {
  check_model_choice(config);
  check_checkpoint_keys(config);
  check_output_names(config);
  check_validation(config);
  check_profiling(config);
}

void resolve_deprecated_keys(Config& config) {
  if (!config.model.tokenizer_path.empty())
    config.model.hf_assets_path = config.model.tokenizer_path;
}

std::vector<std::string> key_kind_warnings(const Config& config) {
  std::vector<std::string> warnings;
  if (!config.model.tokenizer_path.empty()) {
    warnings.push_back(
        fmt::format("{} is deprecated (torchtitan's old name): model.hf_assets_path "
                    "= \"{}\" is used",
                    key_location(config, "model.tokenizer_path"), config.model.hf_assets_path));
  }
  Config copy = config;
  for (const auto& f : config_fields(copy)) {
    if (f.kind != KeyKind::kNoEffect || is_default(f)) continue;
    warnings.push_back(fmt::format("{} = {} has no effect here: {}", key_location(config, f.name()),
                                   value_text(f), f.note));
  }
  return warnings;
}

}  // namespace titan
