#include "app/export.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <ostream>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

struct ExportRequest {
  bool help = false;
  bool force = false;
  std::string checkpoint, output;
  at::ScalarType dtype = at::kFloat;
};

at::ScalarType parse_dtype(const std::string& text) {
  if (auto dtype = parse_enum<ExportDtype>(text)) return export_scalar_type(*dtype);
  throw ConfigError("--dtype", fmt::format("\"{}\" is not a dtype export writes", text),
                    "use float32 or bfloat16");
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
    } else if (a == "-o" || a == "--output") {
      r.output = value(i, a);
    } else if (a == "--dtype") {
      r.dtype = parse_dtype(value(i, a));
    } else if (starts_with(a, "--dtype=")) {
      r.dtype = parse_dtype(a.substr(8));
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
    throw ConfigError("export", "no output file given", "add -o model.safetensors");
  }
  return r;
}

// The step-N folder to read: `dir` itself, or the latest complete one under it.
std::string step_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(dir, "no such checkpoint folder",
                      "give a step-N folder, e.g. outputs/checkpoint/step-100");
  }
  if (fs::exists(dir + "/manifest.txt", ec)) return dir;
  const auto steps = checkpoint_steps(dir);
  if (steps.empty()) {
    throw ConfigError(dir, "neither a checkpoint (no manifest.txt) nor a folder of checkpoints",
                      "give a step-N folder, e.g. outputs/checkpoint/step-100");
  }
  return dir + "/" + checkpoint_folder_name(steps.back());
}

}  // namespace

std::string export_usage() {
  return "usage: titan-train export CHECKPOINT_DIR -o FILE.safetensors [--dtype float32|bfloat16] "
         "[--force]\n"
         "Writes the checkpoint's model weights (torchtitan's parameter names) as safetensors.\n"
         "CHECKPOINT_DIR is a step-N folder or a folder of them (the latest is taken). An "
         "existing\n"
         "FILE is kept unless --force.\n";
}

int run_export(const std::vector<std::string>& args, std::ostream& out) {
  const ExportRequest r = parse_export_args(args);
  if (r.help) {
    out << export_usage();
    return kExitOk;
  }
  std::error_code ec;
  if (fs::exists(r.output, ec) && !r.force) {
    throw ConfigError(r.output, "exists", "remove it, choose another -o, or pass --force");
  }
  const std::string folder = step_folder(r.checkpoint);
  const CheckpointContents c = load_checkpoint(folder);
  const auto tensors = parameters_as(c.model, r.dtype);
  const std::string tmp = r.output + ".tmp";
  fs::remove(tmp, ec);
  HashedFileWriter writer(tmp);
  write_safetensors(writer, tensors, {{"format", "pt"}});
  const auto record = writer.finish();
  if (std::rename(tmp.c_str(), r.output.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeFailure(fmt::format("cannot write {}", r.output));
  }
  out << fmt::format("exported {} tensors ({}, {:.1f} MiB) of {} (step {}) to {}\n", tensors.size(),
                     r.dtype == at::kFloat ? "float32" : "bfloat16",
                     static_cast<double>(record.size) / (1 << 20), folder, c.step, r.output);
  return kExitOk;
}

}  // namespace titan
