// HSDP's two-dimensional mesh over a job's ranks, laid out as torchtitan's ("dp_replicate",
// "dp_shard") mesh: rank = replica * shard_degree + position, so that a shard group is
// consecutive ranks (on one node where the launcher fills nodes in order) and a replica group
// takes one rank from each shard group.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/process_group.h"

namespace titan {

struct HsdpMesh {
  std::unique_ptr<ProcessGroup> shard;    // the ranks this rank's parameters are split over
  std::unique_ptr<ProcessGroup> replica;  // the ranks holding the same shards as this rank
};

// The ranks of `rank`'s shard group and of its replica group in a world of
// replicate_degree * shard_degree ranks.
std::vector<int64_t> shard_group_ranks(int64_t rank, int64_t shard_degree);
std::vector<int64_t> replica_group_ranks(int64_t rank, int64_t replicate_degree,
                                         int64_t shard_degree);

// This rank's two subgroups of `world` (collective: every rank calls it, the shard group is
// joined first). Requires: world.size() == replicate_degree * shard_degree, both >= 1.
HsdpMesh make_hsdp_mesh(ProcessGroup& world, int64_t replicate_degree, int64_t shard_degree);

}  // namespace titan
