// Contract in hsdp_mesh.h.
#include "parallel/hsdp_mesh.h"

#include <fmt/format.h>

#include <stdexcept>

namespace titan {

std::vector<int64_t> shard_group_ranks(int64_t rank, int64_t shard_degree) {
  std::vector<int64_t> ranks;
  const int64_t first = rank / shard_degree * shard_degree;
  for (int64_t s = 0; s < shard_degree; ++s) ranks.push_back(first + s);
  return ranks;
}

std::vector<int64_t> replica_group_ranks(int64_t rank, int64_t replicate_degree,
                                         int64_t shard_degree) {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < replicate_degree; ++r)
    ranks.push_back(r * shard_degree + rank % shard_degree);
  return ranks;
}

HsdpMesh make_hsdp_mesh(ProcessGroup& world, int64_t replicate_degree, int64_t shard_degree) {
  if (replicate_degree < 1 || shard_degree < 1 || world.size() != replicate_degree * shard_degree) {
    throw std::invalid_argument(fmt::format("an HSDP mesh of {} x {} ranks over a world of {}",
                                            replicate_degree, shard_degree, world.size()));
  }
  const int64_t rank = world.rank();
  HsdpMesh mesh;
  mesh.shard = world.subgroup(shard_group_ranks(rank, shard_degree),
                              fmt::format("dp_shard{}", rank / shard_degree));
  mesh.replica = world.subgroup(replica_group_ranks(rank, replicate_degree, shard_degree),
                                fmt::format("dp_replicate{}", rank % shard_degree));
  return mesh;
}

}  // namespace titan
