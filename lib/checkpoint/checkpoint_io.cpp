#include "checkpoint/checkpoint_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "checkpoint/checkpoint_manifest.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/safetensors_reader.h"
#include "config/limits.h"
#include "model/param_storage.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

using FileEntry = CheckpointFile;

// Writes one file of the checkpoint through `write` and records it.
template <class Write>
void write_file(const std::string& folder, const std::string& name,
                const std::function<bool()>& should_abort, std::vector<FileEntry>& files,
                Write write) {
  HashedFileWriter out(folder + "/" + name, should_abort);
  write(out);
  const auto record = out.finish();
  files.push_back({name, record.size, record.checksum});
}

void write_text(HashedFileWriter& out, const std::string& text) {
  out.write(text.data(), text.size());
}

void remove_stale_temporaries(const fs::path& folder) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (starts_with(name, ".step-") && ends_with(name, ".tmp")) fs::remove_all(entry.path(), ec);
  }
}

// Why the folder `path` named `name` is not the checkpoint its name says, or "" when it is (or
// may be: a damaged one is left to load_checkpoint to name).
std::string why_not_a_checkpoint(const std::string& path, const std::string& name) {
  const int64_t step = step_of_folder_name(name);
  if (step < 0) return fmt::format("the name is not step-N with N written without leading zeros");
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "not a folder";
  if (!fs::exists(path + "/" + kManifest, ec)) {
    // A final save in Hugging Face's layout (checkpoint.last_save_in_hf) has no manifest; it is
    // written whole or not at all (write_hf_checkpoint).
    return is_hf_checkpoint_folder(path) ? "" : "incomplete: no manifest.txt";
  }
  try {
    const Manifest m = read_manifest(path);
    if (m.summary.step != step) {
      return fmt::format("its manifest says step {}, its name step {}", m.summary.step, step);
    }
    if (m.summary.model_only) return "";
    const std::string state_path = path + "/train_state.bin";
    const TrainState state =
        decode_train_state(read_file(state_path, kMaxTextFileBytes), state_path);
    if (state.step != step) {
      return fmt::format("its train_state.bin says step {}, its name step {}", state.step, step);
    }
  } catch (const std::exception&) {
    // Damaged, not misnamed: listed, so that loading it names the damaged file (exit 1) instead
    // of quietly resuming from an older checkpoint.
    return "";
  }
  return "";
}

constexpr const char* kCheckpointDamagedHint =
    "the checkpoint is damaged; load another one (checkpoint.load_step)";

// A file the manifest lists that cannot be opened or read, or is larger than it says.
[[noreturn]] void refuse_listed_file(const std::string& path, const FileEntry& f,
                                     const std::system_error& e) {
  const std::string hint = kCheckpointDamagedHint;
  if (e.code().value() == EFBIG) {
    throw RuntimeFailure(
        fmt::format("{}: larger than the {} bytes the manifest says (extended)", path, f.size),
        hint);
  }
  throw RuntimeFailure(fmt::format("{}: {} (listed in the manifest)", path, e.code().message()),
                       hint);
}

std::string read_checked(const std::string& folder, const FileEntry& f) {
  const std::string path = folder + "/" + f.name;
  const std::string hint = kCheckpointDamagedHint;
  std::string bytes;
  try {
    bytes = read_file(path, f.size);
  } catch (const std::system_error& e) {
    refuse_listed_file(path, f, e);
  }
  if (bytes.size() != f.size) {
    throw RuntimeFailure(fmt::format("{}: {} bytes, the manifest says {} (truncated or extended)",
                                     path, bytes.size(), f.size),
                         hint);
  }
  if (hash_bytes(bytes.data(), bytes.size()) != f.checksum) {
    throw RuntimeFailure(
        fmt::format("{}: the contents do not match the manifest's checksum (damaged)", path), hint);
  }
  return bytes;
}

}  // namespace

int64_t step_of_folder_name(const std::string& name) {
  uint64_t step = 0;
  const std::string digits = name.substr(std::min<size_t>(name.size(), 5));
  if (!starts_with(name, "step-") || digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos || !parse_u64(digits, step) ||
      step > static_cast<uint64_t>(INT64_MAX) ||
      checkpoint_folder_name(static_cast<int64_t>(step)) != name) {
    return -1;
  }
  return static_cast<int64_t>(step);
}

std::string checkpoint_folder_name(int64_t step) { return fmt::format("step-{}", step); }

std::string checkpoint_manifest_path(const std::string& step_folder) {
  return step_folder + "/" + kManifest;
}

std::string checkpoint_temp_folder(const std::string& folder, int64_t step) {
  return folder + "/." + checkpoint_folder_name(step) + ".tmp";
}

void begin_checkpoint_write(const std::string& folder, int64_t step) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw RuntimeFailure(fmt::format("cannot create {}: {}", folder, ec.message()));
  remove_stale_temporaries(folder);
  const std::string tmp = checkpoint_temp_folder(folder, step);
  if (!fs::create_directory(tmp, ec) || ec) {
    throw RuntimeFailure(fmt::format("cannot create {}: {}", tmp, ec.message()));
  }
}

void abandon_checkpoint_write(const std::string& folder, int64_t step) {
  std::error_code ec;
  fs::remove_all(checkpoint_temp_folder(folder, step), ec);
}

SaveRecord finish_checkpoint_write(const std::string& folder, const CheckpointContents& c,
                                   const std::vector<CheckpointFile>& shard_files,
                                   const std::function<bool()>& should_abort) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = checkpoint_folder_name(c.step);
  const std::string final_path = folder + "/" + name;
  const std::string tmp = checkpoint_temp_folder(folder, c.step);
  SaveRecord record;
  try {
    std::vector<FileEntry> files = shard_files;
    if (c.shards == 0) {
      write_file(tmp, "model.safetensors", should_abort, files, [&](HashedFileWriter& out) {
        write_safetensors(out, c.model, {{"format", "pt"}});
      });
    }
    if (!c.model_only) {
      if (c.shards == 0) {
        write_file(tmp, "optimizer.safetensors", should_abort, files, [&](HashedFileWriter& out) {
          write_safetensors(out, c.optimizer, c.optimizer_metadata);
        });
      }
      write_file(tmp, "train_state.bin", should_abort, files,
                 [&](HashedFileWriter& out) { write_text(out, encode_train_state(c.state)); });
      for (size_t i = 0; i < c.other_rank_states.size(); ++i) {
        const std::string state_file =
            rank_file_name("train_state.bin", static_cast<int64_t>(i) + 1);
        write_file(tmp, state_file, should_abort, files, [&](HashedFileWriter& out) {
          write_text(out, encode_train_state(c.other_rank_states[i]));
        });
      }
    }
    write_file(tmp, "config.toml", should_abort, files,
               [&](HashedFileWriter& out) { write_text(out, c.config_toml); });
    std::vector<FileEntry> listed = files;
    write_file(tmp, kManifest, should_abort, files,
               [&](HashedFileWriter& out) { write_text(out, format_manifest(c, listed)); });
    fsync_folder(tmp);
    for (const auto& f : files) record.bytes += f.size;
    std::error_code ec;
    if (fs::exists(final_path, ec)) {
      // Only a checkpoint is replaced: a step-N the listing skipped (a renamed backup, a folder
      // without a manifest, a file) is the user's.
      const std::string why = why_not_a_checkpoint(final_path, name);
      if (!why.empty()) {
        throw RuntimeFailure(
            fmt::format("cannot save step {}: {} is in the way and is not a checkpoint ({})",
                        c.step, final_path, why),
            "move it out of the checkpoint folder (nothing was removed), then run the same "
            "command again to resume");
      }
      // Replaced only now that the new one is complete; the old copy goes to a temporary name
      // that the next save removes if this process dies before deleting it.
      const std::string replaced = folder + "/." + name + ".replaced.tmp";
      fs::rename(final_path, replaced);
      fs::rename(tmp, final_path);
      fs::remove_all(replaced, ec);
    } else {
      fs::rename(tmp, final_path);
    }
    fsync_folder(folder);
  } catch (const fs::filesystem_error& e) {
    abandon_checkpoint_write(folder, c.step);
    throw RuntimeFailure(fmt::format("cannot save {}: {}", final_path, e.what()));
  } catch (...) {
    abandon_checkpoint_write(folder, c.step);
    throw;
  }
  record.path = final_path;
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return record;
}

SaveRecord save_checkpoint(const std::string& folder, const CheckpointContents& c,
                           const std::function<bool()>& should_abort) {
  const auto start = std::chrono::steady_clock::now();
  begin_checkpoint_write(folder, c.step);
  SaveRecord record = finish_checkpoint_write(folder, c, {}, should_abort);
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return record;
}

CheckpointListing list_checkpoints(const std::string& folder) {
  CheckpointListing listing;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!starts_with(name, "step-")) continue;
    const std::string why = why_not_a_checkpoint(entry.path().string(), name);
    if (why.empty()) {
      listing.steps.push_back(step_of_folder_name(name));
    } else {
      listing.warnings.push_back(fmt::format("{}: skipped: {}", entry.path().string(), why));
      const int64_t step = step_of_folder_name(name);
      if (step >= 0) listing.skipped_steps.push_back(step);
    }
  }
  std::sort(listing.steps.begin(), listing.steps.end());
  std::sort(listing.warnings.begin(), listing.warnings.end());
  return listing;
}

std::string resolve_step_folder(const std::string& path, std::vector<std::string>& warnings) {
  const std::string hint =
      "give a step-N folder (e.g. outputs/checkpoint/step-100) or the folder "
      "that holds them";
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw ConfigError(path, "no such checkpoint folder", hint);
  if (fs::exists(path + "/" + kManifest, ec)) return path;
  const CheckpointListing listing = list_checkpoints(path);
  warnings.insert(warnings.end(), listing.warnings.begin(), listing.warnings.end());
  if (listing.steps.empty()) {
    throw ConfigError(path, "neither a checkpoint (no manifest.txt) nor a folder of checkpoints",
                      hint);
  }
  return path + "/" + checkpoint_folder_name(listing.steps.back());
}

std::vector<int64_t> prune_checkpoints(const std::string& folder, int64_t keep) {
  std::vector<int64_t> removed;
  if (keep <= 0) return removed;
  const auto steps = list_checkpoints(folder).steps;
  const auto excess = static_cast<int64_t>(steps.size()) - keep;
  for (int64_t i = 0; i < excess; ++i) {
    std::error_code ec;
    fs::remove_all(folder + "/" + checkpoint_folder_name(steps[i]), ec);
    if (!ec) removed.push_back(steps[i]);
  }
  return removed;
}

namespace {

// The files a checkpoint must list: its model and optimizer files, or each shard's.
std::vector<std::string> required_files(const CheckpointContents& c, bool has_rank_state,
                                        const std::string& state_name) {
  std::vector<std::string> required = {"config.toml"};
  if (has_rank_state) required.push_back(state_name);
  if (c.shards == 0) {
    required.push_back("model.safetensors");
    if (!c.model_only) required.push_back("optimizer.safetensors");
  }
  for (int64_t p = 0; p < c.shards; ++p) {
    required.push_back(shard_file_name("model", p));
    if (!c.model_only) required.push_back(shard_file_name("optimizer", p));
  }
  return required;
}

bool is_shard_file(const std::string& file, const std::string& part, int64_t shards) {
  for (int64_t p = 0; p < shards; ++p) {
    if (file == shard_file_name(part, p)) return true;
  }
  return false;
}

// `rows`' rows of each tensor of a whole file (all of them without shards), and in
// `total_rows` (when given) each one's whole row count.
void keep_rows(std::vector<NamedTensor>& tensors, RowShare rows, std::vector<int64_t>* total_rows) {
  for (auto& t : tensors) {
    if (total_rows) total_rows->push_back(t.tensor.dim() == 0 ? 0 : t.tensor.size(0));
    if (rows.shards == 0 || t.tensor.dim() == 0) continue;  // a scalar: refused by its reader
    const RowRange kept = rows.rows_of(t.tensor.size(0));
    t.tensor = t.tensor.narrow(0, kept.begin, kept.end - kept.begin).clone();
  }
}

uint64_t shard_bytes(const Manifest& m, const std::string& part) {
  uint64_t bytes = 0;
  for (const auto& f : m.files) {
    if (is_shard_file(f.name, part, m.summary.shards)) bytes += f.size;
  }
  return bytes;
}

// The tensors of the listed file `f` as its header gives them, without their data (shape_only).
SafetensorsContents header_shapes(const std::string& path, const FileEntry& f) {
  try {
    const SafetensorsReader reader(path, f.size);
    SafetensorsContents shapes;
    shapes.metadata = reader.header().metadata;
    for (const auto& e : reader.header().entries) {
      shapes.tensors.push_back({e.name, shape_only(e.shape, at::TensorOptions().dtype(e.dtype))});
    }
    return shapes;
  } catch (const std::system_error& e) {
    refuse_listed_file(path, f, e);
  }
}

}  // namespace

std::vector<NamedTensor> whole_model_shapes(const CheckpointContents& c) {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < c.model.size(); ++i) {
    std::vector<int64_t> sizes = c.model[i].tensor.sizes().vec();
    if (!sizes.empty() && i < c.model_total_rows.size()) sizes[0] = c.model_total_rows[i];
    out.push_back({c.model[i].name, shape_only(sizes, c.model[i].tensor.options())});
  }
  return out;
}

CheckpointContents load_checkpoint(const std::string& step_folder, int64_t rank, RowShare rows) {
  const RowShare optimizer_rows = rows;
  const Manifest m = read_manifest(step_folder);
  CheckpointContents c;
  c.step = m.summary.step;
  c.model_only = m.summary.model_only;
  c.config_hash = m.summary.config_hash;
  c.world_size = m.summary.world_size;
  c.global_data_order = m.summary.global_data_order;
  c.shards = m.summary.shards;
  c.replicas = m.summary.replicas;
  c.optimizer_rows = optimizer_rows;
  c.model_rows = rows;
  for (const auto& f : m.files) c.files_checksum = hash_combine(c.files_checksum, f.checksum);
  const bool has_rank_state = !c.model_only && rank < c.world_size;
  const std::string state_name = rank_file_name("train_state.bin", rank);
  for (const auto& name : required_files(c, has_rank_state, state_name)) {
    const bool listed = std::any_of(m.files.begin(), m.files.end(),
                                    [&](const FileEntry& f) { return f.name == name; });
    if (!listed) {
      throw RuntimeFailure(fmt::format("{}/{}: not listed in the manifest", step_folder, name),
                           "the checkpoint is damaged; load another one (checkpoint.load_step)");
    }
  }
  // Shard files add their rows to whole tensors (the budget: what the files hold).
  RowAssembler model_shards(shard_bytes(m, "model"), rows);
  RowAssembler optimizer_shards(shard_bytes(m, "optimizer"), optimizer_rows);
  const std::string metadata_shard = shard_file_name("optimizer", 0);
  auto add_optimizer_shard = [&](const SafetensorsContents& part, const std::string& path,
                                 const std::string& name) {
    optimizer_shards.add(part, path);
    if (name != metadata_shard) return;
    for (const auto& [key, value] : part.metadata) {
      if (!starts_with(key, "rows.")) c.optimizer_metadata[key] = value;
    }
  };
  // One file's bytes at a time: each is verified, parsed and released before the next is read.
  // A rank that keeps rows reads only the shard files that hold some of them (their headers
  // say which): the others add their shapes alone.
  for (const auto& f : m.files) {
    const std::string path = step_folder + "/" + f.name;
    const bool model_shard = is_shard_file(f.name, "model", c.shards);
    const bool optimizer_shard = is_shard_file(f.name, "optimizer", c.shards) && !c.model_only;
    if ((model_shard || optimizer_shard) && rows.shards > 0) {
      const SafetensorsContents shapes = header_shapes(path, f);
      RowAssembler& assembler = model_shard ? model_shards : optimizer_shards;
      if (!assembler.holds_kept_rows(shapes, path)) {
        if (model_shard) model_shards.add(shapes, path);
        if (optimizer_shard) add_optimizer_shard(shapes, path, f.name);
        continue;
      }
    }
    std::string bytes = read_checked(step_folder, f);
    if (f.name == "model.safetensors" && c.shards == 0) {
      c.model = parse_safetensors(std::move(bytes), path).tensors;
      keep_rows(c.model, rows, &c.model_total_rows);
    } else if (f.name == "optimizer.safetensors" && c.shards == 0 && !c.model_only) {
      auto optimizer = parse_safetensors(std::move(bytes), path);
      c.optimizer = std::move(optimizer.tensors);
      c.optimizer_metadata = std::move(optimizer.metadata);
      keep_rows(c.optimizer, optimizer_rows, nullptr);
    } else if (model_shard) {
      model_shards.add(parse_safetensors(std::move(bytes), path), path);
    } else if (optimizer_shard) {
      add_optimizer_shard(parse_safetensors(std::move(bytes), path), path, f.name);
    } else if (f.name == state_name && has_rank_state) {
      c.state = decode_train_state(bytes, path);
    } else if (f.name == "config.toml") {
      c.config_toml = bytes;
    }
  }
  if (c.shards > 0) {
    c.model = model_shards.finish(step_folder + "/model.shard*.safetensors", &c.model_total_rows);
    if (!c.model_only) {
      c.optimizer = optimizer_shards.finish(step_folder + "/optimizer.shard*.safetensors");
      c.optimizer_file = metadata_shard;
    }
  }
  return c;
}

}  // namespace titan
