// FSDP's gradient sums under debug.batch_invariant: a reduce-scatter whose sums are bit for bit
// those of the rank-ordered all-reduce (GradientReducer with rank_ordered), whatever the shard
// degree, so that a sharded run's steps stay those of one process.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "distributed/process_group.h"

namespace titan {

// `packed` is this rank's contribution, rank-major as UnitLayout::pack_for_reduce_scatter makes
// it: (ranks * S,) float32. On return `shard` (S,) holds the sum over the ranks of their segment
// rank(), added in PairwiseSum's rank order: each element bit for bit what the rank-ordered
// all-reduce of the same contributions leaves there. Moves and holds ranks x packed's bytes (an
// all-gather of every rank's contribution), as the rank-ordered all-reduce holds ranks x the
// gradients'. Throws RuntimeFailure naming `what` and a rank that is gone; std::invalid_argument
// for shapes that do not fit.
void reduce_scatter_in_rank_order(ProcessGroup& group, at::Tensor& shard, const at::Tensor& packed,
                                  const std::string& what);

}  // namespace titan
