#include "app/export.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <ostream>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "util/error.h"
#include "util/files.h"
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
  std::vector<std::string> warnings;
  const std::string folder = resolve_step_folder(r.checkpoint, warnings);
  for (const auto& w : warnings) std::cerr << "titan-train: warning: " << w << "\n";
  check_output(r, folder);
  const CheckpointContents c = load_checkpoint(folder);
  const auto tensors = parameters_as(c.model, r.dtype);
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
                     r.dtype == at::kFloat ? "float32" : "bfloat16",
                     static_cast<double>(record.size) / (1 << 20), folder, c.step, r.output);
  return kExitOk;
}

}  // namespace titan
