#include "checkpoint/sharded_checkpoint.h"

#include <fmt/format.h>

#include <sstream>

#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

constexpr const char* kRowsPrefix = "rows.";
constexpr const char* kDamagedHint =
    "the checkpoint is damaged; load another one (checkpoint.load_step)";

// Writes one safetensors file of `pieces` (those with rows) and their "rows" entries.
CheckpointFile write_rows_file(const std::string& folder, const std::string& name,
                               const std::vector<RowsPiece>& pieces, SafetensorsMetadata metadata,
                               const std::function<bool()>& should_abort) {
  std::vector<NamedTensor> tensors;
  for (const auto& p : pieces) {
    if (p.rows.size(0) == 0) continue;  // a rank holding padding only
    tensors.push_back({p.name, p.rows});
    metadata[kRowsPrefix + p.name] = fmt::format("{} {}", p.begin, p.total);
  }
  HashedFileWriter out(folder + "/" + name, should_abort);
  write_safetensors(out, tensors, metadata);
  const auto record = out.finish();
  return {name, record.size, record.checksum};
}

struct RowsEntry {
  int64_t begin = 0, total = 0;
};

RowsEntry rows_entry(const SafetensorsMetadata& metadata, const NamedTensor& t,
                     const std::string& source) {
  auto fail = [&](const std::string& what) {
    throw RuntimeFailure(fmt::format("{}: tensor \"{}\": {}", source, t.name, what), kDamagedHint);
  };
  auto it = metadata.find(kRowsPrefix + t.name);
  if (it == metadata.end()) fail("its metadata \"rows." + t.name + "\" is missing");
  const auto words = split_words(it->second);
  uint64_t begin = 0, total = 0;
  if (words.size() != 2 || !parse_u64(words[0], begin) || !parse_u64(words[1], total) ||
      total > static_cast<uint64_t>(INT64_MAX)) {
    fail(fmt::format("its rows \"{}\" are not \"<first row> <total rows>\"", it->second));
  }
  if (t.tensor.dim() == 0 || begin >= total ||
      static_cast<uint64_t>(t.tensor.size(0)) > total - begin) {
    fail(fmt::format("rows {}..{} do not lie in its {} rows", begin,
                     begin + static_cast<uint64_t>(t.tensor.dim() ? t.tensor.size(0) : 0), total));
  }
  return {static_cast<int64_t>(begin), static_cast<int64_t>(total)};
}

}  // namespace

std::string shard_file_name(const std::string& part, int64_t position) {
  return fmt::format("{}.shard{}.safetensors", part, position);
}

std::vector<CheckpointFile> write_checkpoint_shard(const std::string& folder,
                                                   const CheckpointShard& shard,
                                                   const std::function<bool()>& should_abort) {
  std::vector<CheckpointFile> files;
  files.push_back(write_rows_file(folder, shard_file_name("model", shard.position), shard.model,
                                  {{"format", "pt"}}, should_abort));
  files.push_back(write_rows_file(folder, shard_file_name("optimizer", shard.position),
                                  shard.optimizer, shard.optimizer_metadata, should_abort));
  return files;
}

RowRange RowShare::rows_of(int64_t total) const {
  return shards > 0 ? fsdp_rows(total, position, shards) : RowRange{0, total};
}

void RowAssembler::add(const SafetensorsContents& part, const std::string& source) {
  for (const auto& t : part.tensors) {
    const RowsEntry rows = rows_entry(part.metadata, t, source);
    auto fail = [&](const std::string& what) {
      throw RuntimeFailure(fmt::format("{}: tensor \"{}\": {}", source, t.name, what),
                           kDamagedHint);
    };
    auto it = wholes_.find(t.name);
    if (it == wholes_.end()) {
      const RowRange kept = keep_.rows_of(rows.total);
      std::vector<int64_t> sizes = t.tensor.sizes().vec();
      sizes[0] = kept.end - kept.begin;
      const uint64_t row_bytes =
          static_cast<uint64_t>(t.tensor.numel() / std::max<int64_t>(t.tensor.size(0), 1)) *
          t.tensor.element_size();
      const uint64_t left = budget_bytes_ - allocated_bytes_;
      if (row_bytes != 0 && static_cast<uint64_t>(sizes[0]) > left / row_bytes) {
        fail(fmt::format("{} rows are more than the shard files hold", rows.total));
      }
      allocated_bytes_ += row_bytes * static_cast<uint64_t>(sizes[0]);
      it =
          wholes_.emplace(t.name, Whole{at::zeros(sizes, t.tensor.options()), rows.total, kept, {}})
              .first;
      order_.push_back(t.name);
    }
    Whole& whole = it->second;
    if (whole.tensor.scalar_type() != t.tensor.scalar_type() ||
        !whole.tensor.sizes().slice(1).equals(t.tensor.sizes().slice(1)) ||
        whole.total != rows.total) {
      fail("its dtype or shape differs from the other shard files'");
    }
    const int64_t end = rows.begin + t.tensor.size(0);
    auto next = whole.pieces.lower_bound(rows.begin);
    const bool overlaps_next = next != whole.pieces.end() && next->first < end;
    const bool overlaps_previous =
        next != whole.pieces.begin() && std::prev(next)->second > rows.begin;
    if (overlaps_next || overlaps_previous) {
      fail(fmt::format("rows {}..{} are given by another shard file too", rows.begin, end));
    }
    whole.pieces[rows.begin] = end;
    const int64_t from = std::max(rows.begin, whole.kept.begin);
    const int64_t to = std::min(end, whole.kept.end);
    if (to > from) {
      whole.tensor.narrow(0, from - whole.kept.begin, to - from)
          .copy_(t.tensor.narrow(0, from - rows.begin, to - from));
    }
  }
}

bool RowAssembler::holds_kept_rows(const SafetensorsContents& part, const std::string& source) {
  for (const auto& t : part.tensors) {
    const RowsEntry rows = rows_entry(part.metadata, t, source);
    const RowRange kept = keep_.rows_of(rows.total);
    if (rows.begin < kept.end && kept.begin < rows.begin + t.tensor.size(0)) return true;
  }
  return false;
}

std::vector<NamedTensor> RowAssembler::finish(const std::string& what,
                                              std::vector<int64_t>* total_rows) {
  std::vector<NamedTensor> out;
  for (const auto& name : order_) {
    Whole& whole = wholes_.at(name);
    if (total_rows) total_rows->push_back(whole.total);
    int64_t filled = whole.kept.begin;
    for (const auto& [begin, end] : whole.pieces) {
      if (begin > filled || filled >= whole.kept.end) break;
      filled = std::max(filled, end);
    }
    if (filled < whole.kept.end) {
      throw RuntimeFailure(fmt::format("{}: tensor \"{}\": no shard file holds its row {} (of {})",
                                       what, name, filled, whole.total),
                           kDamagedHint);
    }
    out.push_back({name, std::move(whole.tensor)});
  }
  wholes_.clear();
  order_.clear();
  return out;
}

std::string encode_shard_outcome(const ShardWriteOutcome& outcome) {
  using Status = ShardWriteOutcome::Status;
  std::string text = outcome.status == Status::kWritten   ? "written\n"
                     : outcome.status == Status::kAborted ? "aborted\n"
                                                          : "failed\n";
  if (outcome.status == Status::kFailed) return text + outcome.message;
  for (const auto& f : outcome.files)
    text += fmt::format("{} {} {:#018x}\n", f.name, f.size, f.checksum);
  return text;
}

ShardWriteOutcome decode_shard_outcome(const std::string& text, const std::string& source) {
  using Status = ShardWriteOutcome::Status;
  std::istringstream in(text);
  std::string line;
  ShardWriteOutcome outcome;
  std::getline(in, line);
  if (line == "failed") {
    outcome.status = Status::kFailed;
    outcome.message = text.substr(line.size() + 1);
    return outcome;
  }
  if (line != "written" && line != "aborted") {
    throw RuntimeFailure(fmt::format("{}: not a save outcome", source));
  }
  outcome.status = line == "written" ? Status::kWritten : Status::kAborted;
  while (std::getline(in, line)) {
    const auto words = split_words(line);
    CheckpointFile f;
    if (words.size() != 3 || words[0].find('/') != std::string::npos ||
        !parse_u64(words[1], f.size) || !parse_u64(words[2], f.checksum)) {
      throw RuntimeFailure(fmt::format("{}: unexpected line \"{}\"", source, line));
    }
    f.name = words[0];
    outcome.files.push_back(f);
  }
  return outcome;
}

}  // namespace titan
