// write_hf_checkpoint (hf_checkpoint.h).
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <regex>

#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "util/error.h"
#include "util/files.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

struct HfEntry {
  std::string hf_name;
  at::Tensor tensor;  // titan-train's, as given
  int64_t heads = 0;  // rows permuted by this many heads
  uint64_t bytes = 0;
};

// The tensors in Hugging Face's order and names; lm_head left out when tied.
std::vector<HfEntry> hf_entries(const std::vector<NamedTensor>& tensors, const ModelArgs& args,
                                const HfWriteOptions& o, const std::string& folder, bool& tied) {
  std::map<std::string, at::Tensor> by_name;
  for (const auto& t : tensors) {
    if (!by_name.emplace(t.name, t.tensor).second) {
      throw ConfigError(folder, fmt::format("tensor \"{}\" is given twice", t.name));
    }
  }
  const auto shapes = model_parameter_shapes(args);
  if (by_name.size() > shapes.size()) {
    for (const auto& t : tensors) {
      bool known = false;
      for (const auto& p : shapes) known = known || p.name == t.name;
      if (!known) {
        throw ConfigError(folder,
                          fmt::format("tensor \"{}\" is not a parameter of the model", t.name));
      }
    }
  }
  std::vector<HfEntry> out;
  for (const auto& p : shapes) {
    auto it = by_name.find(p.name);
    if (it == by_name.end()) {
      throw ConfigError(folder, fmt::format("tensor \"{}\" is missing", p.name));
    }
    if (it->second.sizes() != at::IntArrayRef(p.sizes) ||
        !at::isFloatingType(it->second.scalar_type())) {
      throw ConfigError(folder,
                        fmt::format("tensor \"{}\" is {}[{}], the model's is [{}]", p.name,
                                    c10::toString(it->second.scalar_type()),
                                    fmt::join(it->second.sizes(), ", "), fmt::join(p.sizes, ", ")));
    }
    const int64_t numel = it->second.numel();
    out.push_back({titan_to_hf_name(p.name), it->second, permuted_heads(p.name, args),
                   static_cast<uint64_t>(numel) * at::elementSize(o.dtype)});
  }
  if (args.tie_embeddings) {  // no output.weight: the model's output is its embedding
    tied = true;
    return out;
  }
  tied = o.tie_if_equal &&
         same_tensor_bits(by_name.at("output.weight"), by_name.at("tok_embeddings.weight"));
  if (tied) out.pop_back();  // lm_head.weight is last
  return out;
}

// Greedy, in order: a shard is closed when the next tensor would take it past the limit.
std::vector<std::vector<const HfEntry*>> shard(const std::vector<HfEntry>& entries,
                                               uint64_t max_bytes) {
  std::vector<std::vector<const HfEntry*>> shards(1);
  uint64_t size = 0;
  for (const auto& e : entries) {
    if (!shards.back().empty() && size + e.bytes > max_bytes) {
      shards.emplace_back();
      size = 0;
    }
    shards.back().push_back(&e);
    size += e.bytes;
  }
  return shards;
}

std::string index_json(const std::vector<std::pair<std::string, std::string>>& weight_map,
                       uint64_t total_size) {
  std::map<std::string, std::string> sorted(weight_map.begin(), weight_map.end());
  std::string out = fmt::format(
      "{{\n  \"metadata\": {{\n    \"total_size\": {}\n  }},\n"
      "  \"weight_map\": {{",
      total_size);
  bool first = true;
  for (const auto& [tensor, file] : sorted) {
    out += fmt::format("{}\n    \"{}\": \"{}\"", first ? "" : ",", tensor, file);
    first = false;
  }
  return out + "\n  }\n}\n";
}

// What this writer puts in a folder; only such a folder is replaced.
bool written_here(const std::string& name) {
  static const std::regex shard_name("model-[0-9]{5}-of-[0-9]{5}\\.safetensors");
  return name == kHfConfigFile || name == kHfSingleFile || name == kHfIndexFile ||
         std::regex_match(name, shard_name);
}

}  // namespace

bool check_hf_checkpoint_target(const std::string& folder, bool replace) {
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    throw FileRefused(folder, "is " + file_type_name(st.st_mode) + ", not a folder",
                      "a Hugging Face checkpoint is written as a new folder; choose another path");
  }
  if (!replace) {
    throw ConfigError(folder, "exists", "remove it, choose another path, or pass --force");
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!written_here(name) || !entry.is_regular_file(ec) || entry.is_symlink(ec)) {
      throw ConfigError(folder,
                        fmt::format("holds \"{}\", which a Hugging Face export does not write: "
                                    "not replaced even with --force",
                                    name),
                        "choose an empty or new folder");
    }
  }
  return true;
}

HfWriteRecord write_hf_checkpoint(const std::string& folder,
                                  const std::vector<NamedTensor>& tensors, const ModelArgs& args,
                                  const HfWriteOptions& o,
                                  const std::function<bool()>& should_abort) {
  hf_dtype_name(o.dtype);  // refuses another dtype before anything is written
  require_hf_layout(args, folder);
  HfWriteRecord record;
  const auto entries = hf_entries(tensors, args, o, folder, record.tied);
  fs::path target = fs::path(folder).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/" -> "out"
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    throw ConfigError(folder, "names no new folder", "give the path of the folder to create");
  }
  const bool exists = check_hf_checkpoint_target(target.string(), o.replace);
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  make_output_folder(parent.string(), FolderLink::kFollow);
  const std::string tmp = (parent / ("." + name + ".tmp")).string();
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) {
    throw RuntimeFailure(fmt::format("cannot create {}: {}", tmp, ec.message()));
  }
  try {
    const auto shards = shard(entries, o.max_shard_bytes);
    std::vector<std::pair<std::string, std::string>> weight_map;
    uint64_t total_size = 0;
    auto write_file = [&](const std::string& file,
                          const std::function<void(HashedFileWriter&)>& f) {
      HashedFileWriter out(tmp + "/" + file, should_abort);
      f(out);
      record.bytes += out.finish().size;
      record.files.push_back(file);
    };
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file =
          shards.size() == 1
              ? std::string(kHfSingleFile)
              : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
      // Converted one shard at a time: the copy costs at most one shard of memory.
      std::vector<NamedTensor> converted;
      for (const HfEntry* e : shards[s]) {
        at::Tensor t = e->tensor.detach().to(at::kCPU).to(o.dtype);
        converted.push_back({e->hf_name, e->heads > 0 ? permute_to_hf(t, e->heads) : t});
        weight_map.emplace_back(e->hf_name, file);
        total_size += e->bytes;
      }
      write_file(file, [&](HashedFileWriter& out) {
        write_safetensors(out, converted, {{"format", "pt"}});
      });
    }
    if (shards.size() > 1) {
      const std::string index = index_json(weight_map, total_size);
      write_file(kHfIndexFile,
                 [&](HashedFileWriter& out) { out.write(index.data(), index.size()); });
    }
    const std::string config = format_hf_config(hf_config_for(args, o.dtype, record.tied));
    write_file(kHfConfigFile,
               [&](HashedFileWriter& out) { out.write(config.data(), config.size()); });
    fsync_folder(tmp);
    if (exists) {
      // Replaced only now that the new folder is complete, as checkpoint_io replaces a step.
      const std::string replaced = (parent / ("." + name + ".replaced.tmp")).string();
      fs::remove_all(replaced, ec);
      fs::rename(target, replaced);
      fs::rename(tmp, target);
      fs::remove_all(replaced, ec);
    } else {
      fs::rename(tmp, target);
    }
    fsync_folder(parent.string());
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw RuntimeFailure(fmt::format("cannot write {}: {}", target.string(), e.what()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  record.path = target.string();
  return record;
}

}  // namespace titan
