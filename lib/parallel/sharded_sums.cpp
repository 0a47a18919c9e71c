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
  // Every rank's segment for this rank, by rank: the exchange copies bits, nothing is summed.
  at::Tensor mine = at::empty({ranks, segment}, packed.options());  // (ranks, S)
  group.start_all_to_all(mine, packed.contiguous().view({ranks, segment}), what)->wait();
  PairwiseSum sum;
  for (int64_t r = 0; r < ranks; ++r) sum.push({mine[r]});
  shard.copy_(sum.collapse()[0]);
}

void sum_in_rank_order(ProcessGroup& group, at::Tensor& value, const std::string& what) {
  const int64_t ranks = group.size();
  // Every rank's bits in its own slot; the integer sum over ranks adds only zeros to them.
  at::Tensor slots = at::zeros({ranks}, at::kLong);
  slots[group.rank()].copy_(value.cpu().to(at::kDouble).reshape({}).view(at::kLong));
  group.all_reduce_sum(slots, what);
  PairwiseSum sum;
  for (int64_t r = 0; r < ranks; ++r) sum.push({slots[r].view(at::kDouble).clone()});
  value.copy_(sum.collapse()[0].reshape(value.sizes()));
}

}  // namespace titan
