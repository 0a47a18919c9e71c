// FSDP's gradient sums under debug.batch_invariant: sums whose bits are those of the rank-ordered
// all-reduce (GradientReducer with rank_ordered: every rank's contribution added in
// PairwiseSum's rank order), whatever the shard degree, so that a sharded run's steps stay
// those of one process. Each rank receives and sums only its own rows.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "distributed/process_group.h"

namespace titan {

// `packed` is this rank's contribution, rank-major as UnitLayout::pack_for_reduce_scatter makes
// it: (ranks * S,) float32. On return `shard` (S,) holds the sum over the ranks of their segment
// rank(), added in PairwiseSum's rank order: each element bit for bit what the rank-ordered
// all-reduce of the same contributions leaves there. An all-to-all moves each rank its segment
// of every rank's contribution: it holds packed's bytes once more, and moves (ranks - 1) / ranks
// of them. Throws RuntimeFailure naming `what` and a rank that is gone; std::invalid_argument
// for shapes that do not fit.
void reduce_scatter_in_rank_order(ProcessGroup& group, at::Tensor& shard, const at::Tensor& packed,
                                  const std::string& what);

// `value` (a float64 scalar, any device) summed over the ranks in PairwiseSum's rank order, in
// place: the loss as the rank-ordered all-reduce sums it. Throws as above.
void sum_in_rank_order(ProcessGroup& group, at::Tensor& value, const std::string& what);

}  // namespace titan
