// Contract in sharded_sums.h.
#include "parallel/sharded_sums.h"

#include <stdexcept>

#include "parallel/pairwise_sum.h"

namespace titan {

void reduce_scatter_in_rank_order(ProcessGroup& group, at::Tensor& shard, const at::Tensor& packed,
                                  const std::string& what) {
  const int64_t ranks = group.size(), segment = shard.numel();
  if (shard.dim() != 1 || packed.dim() != 1 || packed.numel() != ranks * segment ||
      packed.scalar_type() != at::kFloat || shard.scalar_type() != at::kFloat) {
    throw std::invalid_argument(
        "reduce_scatter_in_rank_order: needs a float32 (S,) shard and a (ranks * S,) contribution");
  }
  // Every rank's whole contribution, by rank: all-gather copies bits, so nothing is summed yet.
  at::Tensor all = at::empty({ranks, ranks * segment}, packed.options());  // (ranks, ranks * S)
  group.start_all_gather(all, packed.contiguous().view({1, -1}), what)->wait();
  PairwiseSum sum;
  for (int64_t r = 0; r < ranks; ++r) {
    sum.push({all[r].narrow(0, group.rank() * segment, segment).clone()});
  }
  shard.copy_(sum.collapse()[0]);
}

}  // namespace titan
