#include "data/c4_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "data/data_files.h"
#include "data/gzip.h"
#include "util/error.h"
#include "util/memory_limit.h"
#include "util/strings.h"

namespace titan {
namespace fs = std::filesystem;
namespace {

// The documents of one c4 file, in order (a line with an empty "text" is no document).
std::vector<std::string> read_c4_file(const std::string& file) {
  std::string bytes = read_data_file(file);
  if (ends_with(file, ".gz")) {
    bytes = gunzip(bytes, file, static_cast<uint64_t>(process_memory_limit().bytes));
  }
  if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) bytes.erase(0, 3);
  std::vector<std::string> docs;
  std::istringstream lines(bytes);
  std::string line;
  for (size_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      std::string text = json_text_field(line);
      if (!text.empty()) docs.push_back(std::move(text));
    } catch (const JsonSyntaxError& e) {
      const std::string what = e.what();  // "column C: ..."
      data_error(fmt::format("{}:{}:{}", file, number, e.column()),
                 what.substr(what.find(": ") + 2),
                 "the c4 layout is JSON lines: one object with a string \"text\" field a line");
    }
  }
  return docs;
}

// The files of the split: c4-train.* for c4, c4-validation.* for c4_validation, when the folder
// has such names; otherwise all of them.
std::vector<std::string> split_files(std::vector<std::string> files, DatasetKind kind) {
  const char* prefix = kind == DatasetKind::kC4             ? "c4-train."
                       : kind == DatasetKind::kC4Validation ? "c4-validation."
                                                            : nullptr;
  if (!prefix) return files;
  std::vector<std::string> split;
  for (const auto& f : files) {
    if (fs::path(f).filename().string().rfind(prefix, 0) == 0) split.push_back(f);
  }
  return split.empty() ? files : split;
}

class C4Source : public TokenSource {
 public:
  C4Source(std::vector<std::string> files, std::shared_ptr<const TextEncoder> encoder,
           std::string what)
      : files_(std::move(files)), encoder_(std::move(encoder)), what_(std::move(what)) {
    uint64_t total = 0;
    for (const auto& file : files_) {
      total += read_c4_file(file).size();  // every line checked now, before any output
      ends_.push_back(total);
    }
  }

  uint64_t num_documents() const override { return ends_.empty() ? 0 : ends_.back(); }

  std::vector<int32_t> document(uint64_t index) const override {
    const size_t f =
        static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
    if (f != cached_file_) {
      cached_docs_ = read_c4_file(files_.at(f));
      cached_file_ = f;
    }
    const uint64_t first = f == 0 ? 0 : ends_[f - 1];
    return encoder_->encode_document(cached_docs_.at(static_cast<size_t>(index - first)));
  }

  std::string describe() const override {
    return fmt::format("{} ({} files, {} documents), {}", what_, files_.size(), num_documents(),
                       encoder_->describe());
  }

 private:
  std::vector<std::string> files_;
  std::vector<uint64_t> ends_;  // documents up to and including each file
  std::shared_ptr<const TextEncoder> encoder_;
  std::string what_;
  mutable size_t cached_file_ = SIZE_MAX;
  mutable std::vector<std::string> cached_docs_;
};

}  // namespace

std::string default_c4_path(DatasetKind kind) {
  return kind == DatasetKind::kC4Test ? "tests/assets/c4_test" : "allenai/c4";
}

std::unique_ptr<TokenSource> make_c4_source(DatasetKind kind, const std::string& path,
                                            const std::string& path_key,
                                            std::shared_ptr<const TextEncoder> encoder) {
  std::string folder = path.empty() ? default_c4_path(kind) : path;
  std::error_code ec;
  if (!fs::exists(folder, ec)) {
    throw ConfigError(
        path_key,
        fmt::format("dataset \"{}\" reads {}{}, which does not exist", to_string(kind), folder,
                    path.empty() ? " (its default path)" : ""),
        fmt::format("put the dataset there (JSON lines with a \"text\" field, as .json "
                    "or .json.gz files{}), or set {} to where it is",
                    kind == DatasetKind::kC4Test
                        ? ": torchtitan's tests/assets/c4_test/data.json"
                        : ", e.g. allenai/c4's en/c4-train.*.json.gz shards",
                    path_key));
  }
  if (fs::is_directory(folder + "/en", ec)) folder += "/en";
  auto files = split_files(list_data_files(folder, {".json", ".json.gz"}, path_key), kind);
  auto source = std::make_unique<C4Source>(std::move(files), std::move(encoder),
                                           fmt::format("{} {}", to_string(kind), folder));
  if (source->num_documents() == 0) {
    data_error(folder, "no documents found", "lines look like {\"text\": \"...\"}");
  }
  return source;
}

}  // namespace titan
