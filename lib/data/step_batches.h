// This rank's share of each step's global batch, its position (saved in checkpoints), and which
// saved positions a run may continue from.
//
// Two orders:
//  - per rank (the default, torchtitan's): rank r reads documents r, r + world, ... and a step is
//    its next `micro_batches` batches. A position is one rank's own: a checkpoint resumes only on
//    the world size that saved it.
//  - global (debug.batch_invariant): every rank reads the one sequence of windows a single
//    process reads; step s is the next world x micro_batches batches of it, and rank r keeps the
//    r-th contiguous run of `micro_batches` of them (its sequences are contiguous, so its share
//    is one node of the pairwise tree over the step's sequences). The position is the same on
//    every rank and every world size: a checkpoint resumes on any.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/sources.h"

namespace titan {

struct BatchLayout {
  int64_t local_batch_size = 1;  // sequences per micro-batch
  int64_t seq_len = 1;
  int64_t micro_batches = 1;  // per rank and step (gradient accumulation)
  int64_t rank = 0;
  int64_t world = 1;
  bool global_order = false;
};

class StepBatches {
 public:
  // Throws ConfigError when a finite source has fewer documents than the readers need.
  StepBatches(std::shared_ptr<const TokenSource> source, const BatchLayout& layout);

  // This rank's micro-batches of the next step; the position moves past the whole step.
  std::vector<Batch> next_step();

  LoaderState state() const { return loader_.state(); }
  void load_state(const LoaderState& state) { loader_.load_state(state); }
  bool global_order() const { return layout_.global_order; }

  // Whose saved position this rank continues from: its own, or rank 0's in the global order
  // (one position for all).
  int64_t saved_rank_to_load() const { return layout_.global_order ? 0 : layout_.rank; }

  // Throws ConfigError naming `checkpoint` when the position it saved (by `saved_world` ranks,
  // in the global order or not) cannot continue in this run's layout.
  void check_resumable(int64_t saved_world, bool saved_global_order,
                       const std::string& checkpoint) const;

 private:
  BatchLayout layout_;
  DataLoader loader_;
};

}  // namespace titan
