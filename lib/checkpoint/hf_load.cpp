// load_hf_checkpoint (hf_checkpoint.h).
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/safetensors_reader.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/json_cursor.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHfFolderHint =
    "give the folder of a Hugging Face checkpoint written for this model.name and model.flavor";

std::string shape_text(at::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

// Where the checkpoint's files are: its folder, and the index when it is sharded.
struct HfFiles {
  std::string folder;
  bool sharded = false;
};

HfFiles locate(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw ConfigError(path, "no such file or folder", kHfFolderHint);
  HfFiles f;
  if (fs::is_directory(st)) {
    f.folder = path;
    f.sharded = fs::exists(path + "/" + kHfIndexFile, ec);
    if (!f.sharded && !fs::exists(path + "/" + kHfSingleFile, ec)) {
      throw ConfigError(path, fmt::format("holds neither {} nor {}", kHfSingleFile, kHfIndexFile),
                        kHfFolderHint);
    }
    return f;
  }
  const std::string name = fs::path(path).filename().string();
  if (name != kHfSingleFile && name != kHfIndexFile) {
    throw ConfigError(path, fmt::format("is neither {} nor {}", kHfSingleFile, kHfIndexFile),
                      kHfFolderHint);
  }
  f.folder = fs::path(path).parent_path().string();
  if (f.folder.empty()) f.folder = ".";
  f.sharded = name == kHfIndexFile;
  return f;
}

// A shard's name from the index: a plain file name beside the index, nothing that leaves it.
void check_shard_name(const std::string& name, const std::string& index) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw ConfigError(index, fmt::format("names the shard \"{}\", not a file beside it", name),
                      kHfFolderHint);
  }
}

// weight_map of model.safetensors.index.json: tensor name -> shard file.
std::map<std::string, std::string> read_index(const std::string& path) {
  std::string text;
  try {
    text = read_file(path, kMaxTextFileBytes);
  } catch (const std::system_error& e) {
    throw ConfigError(path, e.code().message(), kHfFolderHint);
  }
  std::map<std::string, std::string> weight_map;
  bool has_map = false;
  try {
    JsonCursor cur(text);
    cur.object([&](const std::string& key) {
      if (key != "weight_map") return cur.skip_value();
      has_map = true;
      cur.object([&](const std::string& tensor) {
        if (cur.peek() != '"') cur.fail(fmt::format("the shard of \"{}\" is not a string", tensor));
        std::string shard;
        cur.string(&shard);
        if (!weight_map.emplace(tensor, shard).second) {
          cur.fail(fmt::format("\"{}\" is listed twice", tensor));
        }
      });
    });
    if (!cur.at_end()) cur.fail("trailing characters after the object");
  } catch (const JsonSyntaxError& e) {
    throw ConfigError(path, fmt::format("JSON, {}", e.what()), kHfFolderHint);
  }
  if (!has_map) throw ConfigError(path, "has no \"weight_map\"", kHfFolderHint);
  for (const auto& [tensor, shard] : weight_map) check_shard_name(shard, path);
  return weight_map;
}

SafetensorsReader open_weights(const std::string& path, uint64_t max_bytes) {
  try {
    return SafetensorsReader(path, max_bytes);
  } catch (const std::system_error& e) {
    if (e.code().value() == EFBIG) {
      throw ConfigError(path,
                        fmt::format("is larger than the {} bytes this model's weights can take in "
                                    "float32 (with 64 MiB for headers)",
                                    max_bytes),
                        kHfFolderHint);
    }
    throw ConfigError(path, e.code().message(), kHfFolderHint);
  }
}

// The rows `keep` chooses of the parameter stored as `e`. wq and wk (heads > 0) are read as the
// whole heads that hold those rows: Hugging Face permutes rows within each head.
at::Tensor read_kept_rows(SafetensorsReader& reader, const SafetensorsEntry& e, int64_t heads,
                          RowShare keep) {
  const RowRange rows = keep.rows_of(e.shape.empty() ? 1 : e.shape[0]);
  if (heads <= 0 || rows.begin == rows.end) return reader.read_rows(e, rows.begin, rows.end);
  const int64_t head_rows = e.shape[0] / heads;
  const int64_t first = rows.begin / head_rows, last = (rows.end + head_rows - 1) / head_rows;
  const at::Tensor block =
      permute_from_hf(reader.read_rows(e, first * head_rows, last * head_rows), last - first);
  return block.narrow(0, rows.begin - first * head_rows, rows.end - rows.begin).clone();
}

}  // namespace

bool is_hf_checkpoint_folder(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec) || !fs::is_regular_file(folder + "/" + kHfConfigFile, ec))
    return false;
  return fs::is_regular_file(folder + "/" + kHfSingleFile, ec) ||
         fs::is_regular_file(folder + "/" + kHfIndexFile, ec);
}

uint64_t hf_max_file_bytes(const ModelArgs& args) {
  return static_cast<uint64_t>(args.num_params()) * 4 + (uint64_t(64) << 20);
}

std::vector<NamedTensor> load_hf_checkpoint(const std::string& path, const ModelArgs& args,
                                            at::ScalarType dtype, HfLoadReport* report,
                                            RowShare keep) {
  require_hf_layout(args, path);
  HfLoadReport local;
  HfLoadReport& r = report ? *report : local;
  r = HfLoadReport{};
  const HfFiles where = locate(path);
  const std::string config_path = where.folder + "/" + kHfConfigFile;
  r.config = read_hf_config(config_path);
  check_hf_config(r.config, args, config_path);

  const std::string index_path = where.folder + "/" + kHfIndexFile;
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> files;
  if (where.sharded) {
    weight_map = read_index(index_path);
    std::set<std::string> seen;
    for (const auto& [tensor, shard] : weight_map) {
      if (seen.insert(shard).second) files.push_back(shard);
    }
  } else {
    files.push_back(kHfSingleFile);
  }

  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& p : model_parameter_shapes(args)) expected[p.name] = p.sizes;
  // A tied model has no output.weight; a file's lm_head.weight is read (checked, then skipped).
  if (args.tie_embeddings) expected["output.weight"] = {args.vocab_size, args.dim};
  std::map<std::string, at::Tensor> loaded;     // by titan name
  std::map<std::string, std::string> found_in;  // HF name -> file
  at::Tensor lm_head;
  std::string lm_head_file;
  int64_t skipped = 0;
  const uint64_t max_bytes = hf_max_file_bytes(args);
  for (const auto& file : files) {
    const std::string file_path = where.folder + "/" + file;
    SafetensorsReader reader = open_weights(file_path, max_bytes);
    r.files.push_back(file_path);
    r.headers_checksum = hash_combine(
        r.headers_checksum, hash_bytes(reader.header().json.data(), reader.header().json.size()));
    for (const auto& t : reader.header().entries) {
      if (!found_in.emplace(t.name, file_path).second) {
        throw ConfigError(file_path,
                          fmt::format("tensor \"{}\" is also in {}", t.name, found_in[t.name]),
                          kHfFolderHint);
      }
      if (where.sharded) {
        auto listed = weight_map.find(t.name);
        if (listed != weight_map.end() && listed->second != file) {
          throw ConfigError(file_path,
                            fmt::format("holds tensor \"{}\", which {} places in {}", t.name,
                                        kHfIndexFile, listed->second),
                            kHfFolderHint);
        }
      }
      if (is_skipped_hf_tensor(t.name)) {
        ++skipped;
        continue;
      }
      const auto titan_name = hf_to_titan_name(t.name);
      if (!titan_name || !expected.count(*titan_name)) {
        throw ConfigError(file_path,
                          fmt::format("tensor \"{}\" is not a parameter of this config's model "
                                      "({} layers)",
                                      t.name, args.n_layers),
                          kHfFolderHint);
      }
      const auto& sizes = expected.at(*titan_name);
      if (at::IntArrayRef(t.shape) != at::IntArrayRef(sizes)) {
        throw ConfigError(file_path,
                          fmt::format("tensor \"{}\" has shape {} there, {} in this config's model",
                                      t.name, shape_text(t.shape), shape_text(sizes)),
                          kHfFolderHint);
      }
      if (!at::isFloatingType(t.dtype)) {
        throw ConfigError(file_path,
                          fmt::format("tensor \"{}\" has dtype {}, not a floating type", t.name,
                                      c10::toString(t.dtype)),
                          kHfFolderHint);
      }
      const at::Tensor value =
          read_kept_rows(reader, t, permuted_heads(*titan_name, args), keep).to(dtype);
      if (*titan_name == "output.weight") {
        lm_head = value;
        lm_head_file = file_path;
        if (r.config.tie_word_embeddings) continue;
      }
      loaded[*titan_name] = value;
    }
    r.bytes += reader.bytes_read();
  }
  if (where.sharded) {
    for (const auto& [tensor, shard] : weight_map) {
      if (!found_in.count(tensor)) {
        throw ConfigError(where.folder + "/" + shard,
                          fmt::format("tensor \"{}\" is missing ({} places it in this file)",
                                      tensor, kHfIndexFile),
                          kHfFolderHint);
      }
    }
  }
  if (skipped > 0) {
    r.notes.push_back(
        fmt::format("skipped {} rotary inv_freq table(s) (titan-train computes "
                    "RoPE itself)",
                    skipped));
  }
  if (r.config.tie_word_embeddings && loaded.count("tok_embeddings.weight")) {
    // As transformers: lm_head is embed_tokens, whatever lm_head.weight the files hold.
    r.tied = true;
    if (!args.tie_embeddings) loaded["output.weight"] = loaded["tok_embeddings.weight"];
    if (lm_head.defined() && !at::equal(lm_head, loaded["tok_embeddings.weight"])) {
      r.notes.push_back(
          fmt::format("{}: lm_head.weight differs from model.embed_tokens.weight "
                      "and is not used: config.json sets tie_word_embeddings",
                      lm_head_file));
    }
  }
  std::vector<NamedTensor> out;
  for (const auto& p : model_parameter_shapes(args)) {
    auto it = loaded.find(p.name);
    if (it == loaded.end()) {
      const std::string hf = titan_to_hf_name(p.name);
      throw ConfigError(
          where.sharded ? index_path : where.folder + "/" + kHfSingleFile,
          fmt::format(
              "tensor \"{}\" is missing{}", hf,
              hf == "lm_head.weight" ? " (config.json does not set tie_word_embeddings)" : ""),
          kHfFolderHint);
    }
    out.push_back({p.name, it->second});
  }
  return out;
}

}  // namespace titan
