// Batches of (seq_len + 1)-token windows cut from a TokenSource, torchtitan style: documents are
// concatenated and cut into consecutive, non-overlapping windows; inputs are window[:-1] and
// labels window[1:].
//
// Rank r of `world` reads documents r, r + world, r + 2 world, ... A finite source re-loops
// (epoch + 1) when exhausted. The position is a small LoaderState that can be saved and
// restored: a loader restored to a state yields exactly what the original yielded from there.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "data/sources.h"

namespace titan {

struct LoaderState {
  uint64_t epoch = 0;       // completed passes over this rank's documents
  uint64_t doc_cursor = 0;  // index into this rank's documents
  uint64_t offset = 0;      // tokens of that document already consumed
  bool operator==(const LoaderState& o) const {
    return epoch == o.epoch && doc_cursor == o.doc_cursor && offset == o.offset;
  }
};

// Where a sequence's tokens came from: `tokens` tokens of document `document` (its index in the
// source, over all ranks) starting at token `offset`.
struct DocumentSpan {
  uint64_t document = 0;
  uint64_t offset = 0;
  uint64_t tokens = 0;
};

struct Batch {
  at::Tensor inputs;                               // (B, T) int64
  at::Tensor labels;                               // (B, T) int64
  std::vector<std::vector<DocumentSpan>> sources;  // per sequence, the window's pieces in order
};

class DataLoader {
 public:
  // Requires batch_size >= 1, seq_len >= 1, 0 <= rank < world. Throws ConfigError when a finite
  // source has fewer documents than ranks.
  DataLoader(std::shared_ptr<const TokenSource> source, int64_t batch_size, int64_t seq_len,
             int64_t rank = 0, int64_t world = 1);

  Batch next();
  // seq_len + 1 tokens; appends where they came from to `sources` when given.
  std::vector<int32_t> next_window(std::vector<DocumentSpan>* sources = nullptr);

  LoaderState state() const { return state_; }
  void load_state(const LoaderState& state);

 private:
  uint64_t rank_documents() const;  // 0: infinite
  const std::vector<int32_t>& current_document();

  std::shared_ptr<const TokenSource> source_;
  int64_t batch_size_, seq_len_, rank_, world_;
  LoaderState state_;
  uint64_t cached_index_ = UINT64_MAX;
  std::vector<int32_t> cached_tokens_;
};

}  // namespace titan
