#include "app/export.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <ostream>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/model_checkpoint.h"
#include "config/loader.h"
#include "model/model_args.h"
#include "models/registry.h"
#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

struct ExportRequest {
  bool help = false;
  bool force = false;
  bool hf = false;
  std::string checkpoint, output;
  std::string dtype = "float32";
};

// The dtype to write: checkpoint.export_dtype's choices (torchtitan's float32, bfloat16,
// float16), for either layout.
at::ScalarType scalar_type(const ExportRequest& r) {
  if (auto dtype = parse_enum<ExportDtype>(r.dtype)) return export_scalar_type(*dtype);
  throw ConfigError("--dtype", fmt::format("\"{}\" is not a dtype export writes", r.dtype),
                    "use float32, bfloat16 or float16");
}

ExportRequest parse_export_args(const std::vector<std::string>& args) {
  ExportRequest r;
  auto value = [&](size_t& i, const std::string& flag) -> const std::string& {
    if (i + 1 == args.size())
      throw ConfigError(flag, "needs a value", "see titan-train export --help");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      r.help = true;
    } else if (a == "--force") {
      r.force = true;
    } else if (a == "--hf") {
      r.hf = true;
    } else if (a == "-o" || a == "--output") {
      r.output = value(i, a);
    } else if (a == "--dtype") {
      r.dtype = value(i, a);
    } else if (starts_with(a, "--dtype=")) {
      r.dtype = a.substr(8);
    } else if (starts_with(a, "-")) {
      throw ConfigError(a, "unknown option of export", "see titan-train export --help");
    } else if (r.checkpoint.empty()) {
      r.checkpoint = a;
    } else {
      throw ConfigError(a, "export takes one checkpoint folder", "see titan-train export --help");
    }
  }
  if (r.help) return r;
  if (r.checkpoint.empty()) {
    throw ConfigError("export", "no checkpoint folder given",
                      "titan-train export CHECKPOINT_DIR -o FILE");
  }
  if (r.output.empty()) {
    throw ConfigError("export", r.hf ? "no output folder given" : "no output file given",
                      r.hf ? "add -o FOLDER" : "add -o model.safetensors");
  }
  scalar_type(r);  // a bad --dtype is refused before the checkpoint is read
  return r;
}

// Refuses an output inside the checkpoint being read (the folder given or its step folder).
void check_outside(const ExportRequest& r, const std::string& step_folder) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(r.output, ec);
  for (const std::string& read : {step_folder, r.checkpoint}) {
    const fs::path folder = fs::weakly_canonical(read, ec);
    const auto rel = out.lexically_relative(folder);
    if (!ec && !rel.empty() && *rel.begin() != "..") {
      throw ConfigError(r.output, fmt::format("is inside {}, the checkpoint being exported", read),
                        "write the export outside the checkpoint folder");
    }
  }
}

// Refuses an output that --force must not replace: anything but a regular file (a device such
// as /dev/null, a FIFO, a link), or a file inside the checkpoint being read.
void check_output(const ExportRequest& r, const std::string& step_folder) {
  struct stat st {};
  const bool exists = ::lstat(r.output.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    throw FileRefused(r.output, "is " + file_type_name(st.st_mode) + ", not a regular file",
                      "export writes a regular .safetensors file; choose another -o");
  }
  if (exists && !r.force) {
    throw ConfigError(r.output, "exists", "remove it, choose another -o, or pass --force");
  }
  check_outside(r, step_folder);
}

// The config the checkpoint was saved with: its model (family, flavor, and training.seq_len as
// its RoPE table length) is the one exported.
Config checkpoint_config(const CheckpointContents& c, const std::string& folder) {
  Config config;
  apply_toml(config, c.config_toml, folder + "/config.toml");
  return config;
}

int export_hf(const ExportRequest& r, const std::string& folder, std::ostream& out) {
  check_outside(r, folder);
  const CheckpointContents c = load_checkpoint(folder);
  const Config config = checkpoint_config(c, folder);
  const ModelArgs args = model_args_for(config);
  HfWriteOptions options;
  options.dtype = scalar_type(r);
  options.tie_if_equal = hf_ties_embeddings(config.model.name, config.model.flavor);
  options.replace = r.force;
  const HfWriteRecord record = write_hf_checkpoint(r.output, c.model, args, options);
  out << fmt::format(
      "exported {} (step {}) to {} as a Hugging Face {} checkpoint: {} files, {}, {:.1f} "
      "MiB{}\n",
      folder, c.step, record.path, hf_family(args).title, record.files.size(), r.dtype,
      static_cast<double>(record.bytes) / (1 << 20),
      record.tied ? ", lm_head tied to embed_tokens" : "");
  return kExitOk;
}

}  // namespace

std::string export_usage() {
  return "usage: titan-train export CHECKPOINT_DIR -o FILE.safetensors [--dtype "
         "float32|bfloat16|float16] "
         "[--force]\n"
         "       titan-train export CHECKPOINT_DIR -o FOLDER --hf "
         "[--dtype float32|bfloat16|float16] [--force]\n"
         "Writes the checkpoint's model weights (torchtitan's parameter names) as safetensors.\n"
         "With --hf, a Hugging Face checkpoint folder (config.json and model.safetensors,\n"
         "or 5 GB shards with model.safetensors.index.json) that transformers'\n"
         "LlamaForCausalLM or Qwen3ForCausalLM loads: its names; for Llama 3, q/k rows in its\n"
         "rotate-half RoPE order and lm_head tied to the embeddings only for the 1B flavor and\n"
         "only when they are bitwise equal; for a tied Qwen3, no lm_head.\n"
         "CHECKPOINT_DIR is a step-N folder or a folder of them (the latest is taken). An "
         "existing\n"
         "FILE or FOLDER is kept unless --force (a folder only when it holds nothing but such an\n"
         "export).\n";
}

int run_export(const std::vector<std::string>& args, std::ostream& out) {
  const ExportRequest r = parse_export_args(args);
  if (r.help) {
    out << export_usage();
    return kExitOk;
  }
  std::vector<std::string> warnings;
  const std::string folder = resolve_step_folder(r.checkpoint, warnings);
  for (const auto& w : warnings) std::cerr << "titan-train: warning: " << w << "\n";
  if (r.hf) return export_hf(r, folder, out);
  check_output(r, folder);
  const CheckpointContents c = load_checkpoint(folder);
  const at::ScalarType dtype = scalar_type(r);
  const auto tensors = parameters_as(c.model, dtype);
  const std::string tmp = r.output + ".tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  HashedFileWriter writer(tmp);
  write_safetensors(writer, tensors, {{"format", "pt"}});
  const auto record = writer.finish();
  if (std::rename(tmp.c_str(), r.output.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeFailure(fmt::format("cannot write {}", r.output));
  }
  out << fmt::format("exported {} tensors ({}, {:.1f} MiB) of {} (step {}) to {}\n", tensors.size(),
                     r.dtype, static_cast<double>(record.size) / (1 << 20), folder, c.step,
                     r.output);
  return kExitOk;
}

}  // namespace titan
