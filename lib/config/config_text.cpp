// Config -> TOML text, and the --help listing. Both walk the field table.
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "config/field_io.h"
#include "config/loader.h"
#include "config/schema.h"
#include "util/strings.h"

namespace titan {

std::string to_toml(const Config& config) {
  Config copy = config;
  auto fields = config_fields(copy);
  std::string out =
      "# Resolved titan-train config: titan-train --config <this file> repeats the run.\n";
  for (auto& section : config_sections()) {
    out += fmt::format("\n[{}]\n", section);
    for (auto& f : fields) {
      if (f.section != section) continue;
      if (f.has_value()) {
        out += fmt::format("{} = {}\n", f.key, f.value_as_toml());
      } else {
        out += fmt::format("# {} is unset\n", f.key);
      }
    }
  }
  return out;
}

namespace {

// A TOML value of the field table as JSON: the same text for numbers and booleans, strings and
// lists re-quoted, unset optionals null.
std::string json_value(const FieldSpec& f) {
  if (!f.has_value()) return "null";
  std::string toml = f.value_as_toml();
  if (toml == "inf" || toml == "-inf" || toml == "nan") return "\"" + toml + "\"";
  return toml;  // TOML basic strings and arrays of them are JSON strings and arrays
}

// Sections as nested JSON objects: "training.dataloader" inside "training".
struct JsonSection {
  std::vector<std::pair<std::string, std::string>> values;  // key, JSON value
  std::vector<std::pair<std::string, JsonSection>> children;
  JsonSection& child(const std::string& name) {
    for (auto& [n, c] : children) {
      if (n == name) return c;
    }
    children.emplace_back(name, JsonSection());
    return children.back().second;
  }
  std::string format(int indent) const {
    const std::string pad(static_cast<size_t>(indent + 2), ' ');
    std::vector<std::string> items;
    for (const auto& [k, v] : values) items.push_back(fmt::format("{}\"{}\": {}", pad, k, v));
    for (const auto& [n, c] : children)
      items.push_back(fmt::format("{}\"{}\": {}", pad, n, c.format(indent + 2)));
    if (items.empty()) return "{}";
    return "{\n" + fmt::format("{}", fmt::join(items, ",\n")) + "\n" +
           std::string(static_cast<size_t>(indent), ' ') + "}";
  }
};

}  // namespace

std::string to_json(const Config& config) {
  Config copy = config;
  JsonSection root;
  for (const auto& section : config_sections()) {
    JsonSection* node = &root;
    for (const auto& part : split_list(section, '.')) node = &node->child(part);
    for (auto& f : config_fields(copy)) {
      if (f.section == section) node->values.emplace_back(f.key, json_value(f));
    }
  }
  return root.format(0) + "\n";
}

std::string help_text() {
  Config defaults;
  auto fields = config_fields(defaults);
  std::string out =
      "Usage: titan-train [--config FILE] [--section.key VALUE | --section.key=VALUE ...]\n"
      "\n"
      "Trains a Llama 3 model. Values come from the defaults below, then the TOML file, then\n"
      "the command line (last wins). A bare boolean flag means true.\n"
      "\n"
      "Options:\n"
      "  --config FILE      TOML config file (alias --job.config_file)\n"
      "  --print-config     print the resolved config as TOML and exit\n"
      "  --version          print titan-train and libtorch versions and CUDA availability\n"
      "  --help             print this help\n"
      "\n"
      "Subcommands:\n"
      "  titan-train compare RUN_A RUN_B [--tolerance REL] [--json]\n"
      "                     where two runs' numerics part (titan-train compare --help)\n"
      "  titan-train export CHECKPOINT_DIR -o OUT [--hf] [--dtype D] [--force]\n"
      "                     a checkpoint's weights as safetensors or a Hugging Face folder\n"
      "  titan-train tokenize [--config FILE] [--section.key VALUE ...] -o OUT.bin [--force]\n"
      "                     the training text's token stream as the loader reads it (uint32)\n"
      "\n"
      "Exit codes: 0 success, 1 runtime failure, 2 bad config or usage,\n"
      "            3 a determinism or recompute check failed,\n"
      "            128 + N stopped by signal N between steps (143 SIGTERM, 130 SIGINT).\n";
  for (auto& section : config_sections()) {
    out += fmt::format("\n[{}]\n", section);
    for (auto& f : fields) {
      if (f.section != section) continue;
      std::string default_text = f.has_value() ? f.value_as_toml() : "unset";
      out += fmt::format("  --{:<40} {:<12} default: {}\n", f.name(), f.type_name(), default_text);
      out += fmt::format("      {}\n", f.help);
      if (const std::string bounds = bound_text(f); !bounds.empty()) {
        out += fmt::format("      range: {}\n", bounds);
      }
      if (!f.choices.empty()) {
        std::string choices;
        for (auto& c : f.choices) choices += (choices.empty() ? "" : " | ") + c;
        out += fmt::format("      one of: {}\n", choices);
      }
      if (f.excluded_from_hash) {
        out += "      outside the config hash\n";
      } else if (f.hashed_when_changed) {
        out += "      in the config hash when not at its default\n";
      }
      if (f.kind == KeyKind::kNoEffect) {
        out += fmt::format("      no effect here: {}\n", f.note);
      } else if (f.kind == KeyKind::kRefused) {
        out += fmt::format("      refused unless {}: {}\n", default_text, f.note);
      }
    }
  }
  return out;
}

}  // namespace titan
