#include "checkpoint/checkpoint_manifest.h"

#include <fmt/format.h>

#include <sstream>
#include <system_error>

#include "config/limits.h"
#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

constexpr const char* kManifestFormat = "titan-train checkpoint 1";

}  // namespace

std::string format_manifest(const CheckpointContents& c, const std::vector<CheckpointFile>& files) {
  std::string text = fmt::format("{}\nstep {}\nkind {}\nconfig_hash {:#018x}\n", kManifestFormat,
                                 c.step, c.model_only ? "model_only" : "full", c.config_hash);
  if (c.world_size > 1) text += fmt::format("world_size {}\n", c.world_size);
  if (c.global_data_order) text += "data_order global\n";
  if (c.shards > 0) text += fmt::format("mesh replicate {} shard {}\n", c.replicas, c.shards);
  for (const auto& f : files)
    text += fmt::format("file {} {} {:#018x}\n", f.name, f.size, f.checksum);
  return text;
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  auto fail = [&](const std::string& what) {
    throw RuntimeFailure(fmt::format("{}:{}: {}", path, line_number, what),
                         "the checkpoint is damaged; load another one (checkpoint.load_step)");
  };
  Manifest m;
  bool has_step = false, has_kind = false, has_hash = false;
  while (std::getline(in, line)) {
    ++line_number;
    auto words = split_words(line);
    if (line_number == 1) {
      if (line != kManifestFormat) fail(fmt::format("expected \"{}\"", kManifestFormat));
      continue;
    }
    uint64_t a = 0, b = 0;
    if (words.size() == 2 && words[0] == "step" && parse_u64(words[1], a)) {
      m.summary.step = static_cast<int64_t>(a);
      has_step = true;
    } else if (words.size() == 2 && words[0] == "kind" &&
               (words[1] == "full" || words[1] == "model_only")) {
      m.summary.model_only = words[1] == "model_only";
      has_kind = true;
    } else if (words.size() == 2 && words[0] == "config_hash" && parse_u64(words[1], a)) {
      m.summary.config_hash = a;
      has_hash = true;
    } else if (words.size() == 2 && words[0] == "world_size" && parse_u64(words[1], a) && a >= 1 &&
               a <= static_cast<uint64_t>(limits::kMaxWorldSize)) {
      m.summary.world_size = static_cast<int64_t>(a);
    } else if (words.size() == 5 && words[0] == "mesh" && words[1] == "replicate" &&
               words[3] == "shard" && parse_u64(words[2], a) && parse_u64(words[4], b) && a >= 1 &&
               b >= 1 && a * b <= static_cast<uint64_t>(limits::kMaxWorldSize)) {
      m.summary.replicas = static_cast<int64_t>(a);
      m.summary.shards = static_cast<int64_t>(b);
    } else if (words.size() == 2 && words[0] == "data_order" && words[1] == "global") {
      m.summary.global_data_order = true;
    } else if (words.size() == 4 && words[0] == "file" && parse_u64(words[2], a) &&
               parse_u64(words[3], b) && words[1].find('/') == std::string::npos) {
      m.files.push_back({words[1], a, b});
    } else {
      fail(fmt::format("unexpected line \"{}\"", line));
    }
  }
  if (line_number == 0) fail("empty manifest");
  if (!has_step || !has_kind || !has_hash) fail("the manifest lacks its step, kind or config_hash");
  return m;
}

Manifest read_manifest(const std::string& step_folder) {
  const std::string path = step_folder + "/" + kManifest;
  std::string text;
  try {
    text = read_file(path, kMaxTextFileBytes);
  } catch (const std::system_error& e) {
    throw RuntimeFailure(fmt::format("{}: {}", path, e.code().message()),
                         "not a complete checkpoint; load another one (checkpoint.load_step)");
  }
  return parse_manifest(text, path);
}

}  // namespace titan
