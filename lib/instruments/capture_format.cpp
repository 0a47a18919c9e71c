#include "instruments/capture_format.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_io.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTraceMagic = "# titan-train capture trace v1";
constexpr const char* kManifestMagic = "titan-train capture";
// The files a capture holds beside state/ and its manifest, each read whole.
const CaptureFile kCaptureFiles[] = {CaptureFile::kBatch, CaptureFile::kConfig,
                                     CaptureFile::kMachine, CaptureFile::kTrace};
constexpr uint64_t kMaxCaptureFileBytes = uint64_t(1) << 30;

std::string hex(double v) { return fmt::format("{:a}", v); }

// A double written by hex(), or decimal.
bool parse_double(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

bool parse_i64(const std::string& text, int64_t& value) {
  uint64_t u = 0;
  if (!parse_u64(text, u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
  value = static_cast<int64_t>(u);
  return true;
}

bool parse_hex64(const std::string& text, uint64_t& value) {
  if (text.empty() || text.size() > 16) return false;
  char* end = nullptr;
  value = std::strtoull(text.c_str(), &end, 16);
  return end == text.c_str() + text.size();
}

std::string major_of(const std::string& version) { return version.substr(0, version.find('.')); }

}  // namespace

const char* capture_file_name(CaptureFile file) {
  switch (file) {
    case CaptureFile::kState:
      return "state";
    case CaptureFile::kBatch:
      return "batch.safetensors";
    case CaptureFile::kTrace:
      return "trace.txt";
    case CaptureFile::kMachine:
      return "machine.txt";
    case CaptureFile::kConfig:
      return "config.toml";
    case CaptureFile::kManifest:
      return "manifest.txt";
  }
  return "";
}

std::string capture_path(const std::string& capture, CaptureFile file) {
  return capture + "/" + capture_file_name(file);
}

CaptureRecord capture_record_of(const PrecisionReport& report) {
  CaptureRecord c;
  c.step = report.step;
  c.dtype = report.dtype;
  c.loss = report.loss.run;
  c.grad_norm = report.grad_norm.run;
  c.reference_loss = report.loss.reference;
  c.reference_grad_norm = report.grad_norm.reference;
  c.reexecution_bitwise = report.reexecution_bitwise;
  for (const auto& op : report.ops) {
    std::string shape = op.shape;  // one word in trace.txt: "[2,16,64]"
    shape.erase(std::remove(shape.begin(), shape.end(), ' '), shape.end());
    c.ops.push_back({op.micro_batch, op.block, op.index, op.name, op.dtype, shape, op.checksum,
                     op.norm, op.added});
  }
  for (const auto& g : report.gradients) c.gradients.push_back({g.name, g.checksum});
  return c;
}

std::string format_capture_record(const CaptureRecord& c) {
  std::string out = std::string(kTraceMagic) + "\n";
  out += fmt::format("step {}\ndtype {}\n", c.step, c.dtype);
  out += fmt::format("loss {}\ngrad_norm {}\n", hex(c.loss), hex(c.grad_norm));
  out += fmt::format("reference_loss {}\nreference_grad_norm {}\n", hex(c.reference_loss),
                     hex(c.reference_grad_norm));
  out += fmt::format("reexecution_bitwise {}\n", c.reexecution_bitwise ? "true" : "false");
  for (const auto& op : c.ops) {
    out += fmt::format("op {} {} {} {} {} {} {:016x} {} {} {}\n", op.micro_batch, op.block,
                       op.index, op.name, op.dtype, op.shape, op.checksum, hex(op.norm),
                       hex(op.added.max_rel), hex(op.added.rms_rel));
  }
  for (const auto& g : c.gradients) out += fmt::format("grad {} {:016x}\n", g.name, g.checksum);
  return out;
}

CaptureRecord parse_capture_record(const std::string& text, const std::string& source) {
  CaptureRecord c;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  auto refuse = [&](const std::string& what) {
    return ConfigError(fmt::format("{}:{}", source, number), what,
                       "the capture is damaged: capture the step again");
  };
  std::set<std::string> seen;
  while (std::getline(lines, line)) {
    ++number;
    if (number == 1) {
      if (line != kTraceMagic)
        throw refuse(fmt::format("not a capture trace (\"{}\")", kTraceMagic));
      continue;
    }
    const auto w = split_words(line);
    if (w.empty()) continue;
    const std::string& key = w[0];
    bool ok = true;
    if (key == "op" && w.size() == 11) {
      CapturedOp op;
      ok = parse_i64(w[1], op.micro_batch) && parse_i64(w[2], op.block) &&
           parse_i64(w[3], op.index) && parse_hex64(w[7], op.checksum) &&
           parse_double(w[8], op.norm) && parse_double(w[9], op.added.max_rel) &&
           parse_double(w[10], op.added.rms_rel);
      op.name = w[4];
      op.dtype = w[5];
      op.shape = w[6];
      c.ops.push_back(std::move(op));
    } else if (key == "grad" && w.size() == 3) {
      CapturedGradient g{w[1], 0};
      ok = parse_hex64(w[2], g.checksum);
      c.gradients.push_back(std::move(g));
    } else if (w.size() == 2 && seen.insert(key).second) {
      if (key == "step") {
        ok = parse_i64(w[1], c.step);
      } else if (key == "dtype") {
        c.dtype = w[1];
      } else if (key == "loss") {
        ok = parse_double(w[1], c.loss);
      } else if (key == "grad_norm") {
        ok = parse_double(w[1], c.grad_norm);
      } else if (key == "reference_loss") {
        ok = parse_double(w[1], c.reference_loss);
      } else if (key == "reference_grad_norm") {
        ok = parse_double(w[1], c.reference_grad_norm);
      } else if (key == "reexecution_bitwise") {
        ok = w[1] == "true" || w[1] == "false";
        c.reexecution_bitwise = w[1] == "true";
      } else {
        ok = false;
      }
    } else {
      ok = false;
    }
    if (!ok) throw refuse(fmt::format("cannot read \"{}\"", line.substr(0, 120)));
  }
  for (const char* key : {"step", "dtype", "loss", "grad_norm", "reference_loss",
                          "reference_grad_norm", "reexecution_bitwise"}) {
    if (!seen.count(key)) throw refuse(fmt::format("no \"{}\" line", key));
  }
  return c;
}

std::map<std::string, std::string> parse_machine_description(const std::string& text,
                                                             const std::string& source) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos) {
      throw ConfigError(fmt::format("{}:{}", source, number), "not a \"key value\" line",
                        "the capture is damaged: capture the step again");
    }
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

std::vector<NamedTensor> batch_tensors(const std::vector<Batch>& batches) {
  std::vector<NamedTensor> out;
  for (size_t m = 0; m < batches.size(); ++m) {
    out.push_back({fmt::format("inputs.{}", m), batches[m].inputs.contiguous()});
    out.push_back({fmt::format("labels.{}", m), batches[m].labels.contiguous()});
  }
  return out;
}

std::vector<Batch> batches_of(const std::vector<NamedTensor>& tensors, const std::string& source) {
  std::map<std::string, at::Tensor> by_name;
  for (const auto& t : tensors) by_name[t.name] = t.tensor;
  std::vector<Batch> out;
  for (size_t m = 0; by_name.count(fmt::format("inputs.{}", m)); ++m) {
    Batch b;
    b.inputs = by_name[fmt::format("inputs.{}", m)];
    b.labels = by_name[fmt::format("labels.{}", m)];
    if (!b.labels.defined() || b.inputs.scalar_type() != at::kLong ||
        b.labels.scalar_type() != at::kLong || b.inputs.dim() != 2 ||
        b.inputs.sizes() != b.labels.sizes()) {
      throw ConfigError(source,
                        fmt::format("micro-batch {} is not two int64 (B, T) tensors "
                                    "inputs.{} and labels.{} of one shape",
                                    m, m, m),
                        "the capture is damaged: capture the step again");
    }
    out.push_back(std::move(b));
  }
  if (out.empty() || out.size() * 2 != tensors.size()) {
    throw ConfigError(source, "holds no micro-batches inputs.0, labels.0, ... (and nothing else)",
                      "the capture is damaged: capture the step again");
  }
  return out;
}

std::string capture_folder_name(int64_t step) { return fmt::format("step{}", step); }

std::string capture_state_folder(const std::string& capture, int64_t step) {
  return capture_path(capture, CaptureFile::kState) + "/" + checkpoint_folder_name(step - 1);
}

void write_capture_manifest(const std::string& folder, int64_t step) {
  std::string out = fmt::format("{} {}\ntitan_train_version {}\nstep {}\n", kManifestMagic,
                                kCaptureFormat, TITAN_VERSION, step);
  for (const CaptureFile file : kCaptureFiles) {
    const char* name = capture_file_name(file);
    const std::string bytes = read_file(capture_path(folder, file), kMaxCaptureFileBytes);
    out += fmt::format("file {} {} {:016x}\n", name, bytes.size(),
                       hash_bytes(bytes.data(), bytes.size()));
  }
  const std::string state_manifest = checkpoint_manifest_path(capture_state_folder(folder, step));
  const std::string bytes = read_file(state_manifest, kMaxCaptureFileBytes);
  out += fmt::format("file {} {} {:016x}\n", state_manifest.substr(folder.size() + 1), bytes.size(),
                     hash_bytes(bytes.data(), bytes.size()));
  write_file_atomically(capture_path(folder, CaptureFile::kManifest), out);
}

namespace {

// A manifest's "file NAME SIZE CHECKSUM" line.
struct ListedFile {
  std::string name, where;
  uint64_t size = 0, checksum = 0;
};

// The names a capture of `step` lists: its files and the state checkpoint's manifest, relative.
std::set<std::string> capture_file_names(int64_t step) {
  std::set<std::string> names;
  for (const CaptureFile file : kCaptureFiles) names.insert(capture_file_name(file));
  names.insert(checkpoint_manifest_path(capture_state_folder("", step)).substr(1));
  return names;
}

void check_listed_file(const std::string& folder, const ListedFile& f, const std::string& hint) {
  const std::string path = folder + "/" + f.name;
  std::string bytes;
  try {
    bytes = read_file(path, kMaxCaptureFileBytes);
  } catch (const std::system_error& e) {
    throw ConfigError(path, fmt::format("cannot be read: {}", e.code().message()), hint);
  }
  if (bytes.size() != f.size) {
    throw ConfigError(path,
                      fmt::format("holds {} bytes; the manifest says {} (truncated or altered)",
                                  bytes.size(), f.size),
                      hint);
  }
  if (hash_bytes(bytes.data(), bytes.size()) != f.checksum) {
    throw ConfigError(path, "its checksum differs from the manifest's (altered, or another run's)",
                      hint);
  }
}

}  // namespace

CaptureManifest check_capture_folder(const std::string& folder) {
  const std::string manifest_path = capture_path(folder, CaptureFile::kManifest);
  const std::string hint = "a capture is copied whole: copy <dump_folder>/capture/step<N>/ again";
  std::string text;
  try {
    text = read_file(manifest_path, kMaxTextFileBytes);
  } catch (const std::system_error& e) {
    throw ConfigError(manifest_path, fmt::format("cannot be read: {}", e.code().message()),
                      "name a capture folder, <dump_folder>/capture/step<N>");
  }
  CaptureManifest m;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  std::vector<ListedFile> files;
  bool have_step = false;
  while (std::getline(lines, line)) {
    ++number;
    const auto w = split_words(line);
    const std::string where = fmt::format("{}:{}", manifest_path, number);
    if (number == 1) {
      if (w.size() != 3 || fmt::format("{} {}", w[0], w[1]) != kManifestMagic)
        throw ConfigError(where, "not a capture manifest", hint);
      if (w[2] != std::to_string(kCaptureFormat)) {
        throw ConfigError(
            where,
            fmt::format("capture format {}; this build reads format {}", w[2], kCaptureFormat),
            "replay it with the titan-train that captured it");
      }
    } else if (w.size() == 2 && w[0] == "titan_train_version") {
      m.titan_version = w[1];
      if (major_of(w[1]) != major_of(TITAN_VERSION)) {
        throw ConfigError(where,
                          fmt::format("captured by titan-train {}, major version {}; this is {}",
                                      w[1], major_of(w[1]), TITAN_VERSION),
                          "replay it with a titan-train of the same major version");
      }
    } else if (w.size() == 2 && w[0] == "step") {
      have_step = parse_i64(w[1], m.step) && m.step >= 1;
      if (!have_step) throw ConfigError(where, "not a step number", hint);
    } else if (w.size() == 4 && w[0] == "file") {
      ListedFile f{w[1], where};
      if (!parse_u64(w[2], f.size) || !parse_hex64(w[3], f.checksum))
        throw ConfigError(where, "a file line is \"file NAME SIZE CHECKSUM\"", hint);
      files.push_back(std::move(f));
    } else {
      throw ConfigError(where, fmt::format("cannot read \"{}\"", line.substr(0, 120)), hint);
    }
  }
  if (m.titan_version.empty() || !have_step)
    throw ConfigError(manifest_path, "has no titan_train_version or step line", hint);
  std::set<std::string> unlisted = capture_file_names(m.step);
  for (const ListedFile& f : files) {
    if (!unlisted.erase(f.name)) {
      throw ConfigError(f.where,
                        fmt::format("lists {}, which is not a file of a capture of step {} (or "
                                    "is listed twice)",
                                    f.name, m.step),
                        hint);
    }
    check_listed_file(folder, f, hint);
  }
  if (!unlisted.empty()) {
    throw ConfigError(manifest_path, fmt::format("does not list {}", *unlisted.begin()), hint);
  }
  return m;
}

}  // namespace titan
