#include "data/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace titan {

DataLoader::DataLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size,
                       int64_t seq_len, int64_t rank, int64_t world)
    : source_(std::move(source)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      rank_(rank),
      world_(world) {
  if (source_->num_documents() != 0 && source_->num_documents() < static_cast<uint64_t>(world_)) {
    throw ConfigError(
        "training.dataset_path",
        fmt::format("{} documents cannot be split over {} ranks", source_->num_documents(), world_),
        "use a larger dataset or fewer ranks");
  }
}

uint64_t DataLoader::rank_documents() const {
  uint64_t n = source_->num_documents();
  if (n == 0) return 0;
  return (n - rank_ + world_ - 1) / world_;
}

const std::vector<int32_t>& DataLoader::current_document() {
  uint64_t global = state_.doc_cursor * world_ + rank_;
  if (global != cached_index_) {
    cached_tokens_ = source_->document(global);
    cached_index_ = global;
  }
  return cached_tokens_;
}

std::vector<int32_t> DataLoader::next_window(std::vector<DocumentSpan>* sources) {
  std::vector<int32_t> window;
  window.reserve(seq_len_ + 1);
  uint64_t empty_in_a_row = 0;
  while (window.size() < static_cast<size_t>(seq_len_ + 1)) {
    const auto& doc = current_document();
    // A tokenizer that adds no BOS/EOS can turn a document into no tokens; a rank whose every
    // document is empty would loop here forever.
    empty_in_a_row = doc.empty() ? empty_in_a_row + 1 : 0;
    if (rank_documents() != 0 && empty_in_a_row > rank_documents()) {
      throw ConfigError("training.dataset_path",
                        fmt::format("every document of rank {} encodes to no tokens ({})", rank_,
                                    source_->describe()),
                        "check the dataset's text and the tokenizer (model.hf_assets_path)");
    }
    size_t take = std::min(doc.size() - state_.offset, seq_len_ + 1 - window.size());
    if (sources) sources->push_back({cached_index_, state_.offset, take});
    window.insert(window.end(), doc.begin() + state_.offset, doc.begin() + state_.offset + take);
    state_.offset += take;
    if (state_.offset == doc.size()) {
      state_.offset = 0;
      ++state_.doc_cursor;
      if (rank_documents() != 0 && state_.doc_cursor == rank_documents()) {
        state_.doc_cursor = 0;
        ++state_.epoch;
      }
    }
  }
  return window;
}

Batch DataLoader::next() {
  auto windows = at::empty({batch_size_, seq_len_ + 1}, at::kLong);
  auto* data = windows.data_ptr<int64_t>();
  std::vector<std::vector<DocumentSpan>> sources(batch_size_);
  for (int64_t b = 0; b < batch_size_; ++b) {
    auto w = next_window(&sources[b]);
    std::copy(w.begin(), w.end(), data + b * (seq_len_ + 1));
  }
  return {windows.narrow(1, 0, seq_len_).contiguous(), windows.narrow(1, 1, seq_len_).contiguous(),
          std::move(sources)};
}

void DataLoader::load_state(const LoaderState& state) { state_ = state; }

}  // namespace titan
