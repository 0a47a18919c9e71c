// How a run of several processes parallelizes over data: FSDP (torchtitan's default: the shard
// degree fills the world), HSDP (replicate x shard: FSDP within each shard group, gradients
// summed over the replicas) or replication, and, where the config asks for sharding that a
// feature it enables cannot run with yet, why the run replicates instead (the start-up log says
// it).
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/sharded_checkpoint.h"
#include "config/config.h"
#include "model/model.h"

namespace titan {

struct DataParallelPlan {
  int64_t replicate = 1;  // the degrees with -1 resolved
  int64_t shard = 1;
  // Parameters, gradients and optimizer state sharded over `shard` ranks (HSDP when
  // replicate > 1 too).
  bool fsdp = false;
  // Why a shard degree above 1 runs as replication ("" when it does not): the key that needs
  // the whole model on every rank.
  std::string replicated_because;

  bool hsdp() const { return fsdp && replicate > 1; }
  // The ranks the model state is split over (1: every rank holds it whole).
  int64_t state_shards() const { return fsdp ? shard : 1; }
  // How the model is built on `device`: shape only under FSDP (each rank materializes only its
  // rows: DataParallel::load_rows), holding memory otherwise.
  ParamMemory param_memory(const c10::Device& device) const;
  // The rows of the weights and AdamW state a resume loads on `rank`: its place in its shard
  // group under FSDP (no rank builds the whole weights or moments), all of them otherwise.
  RowShare loaded_rows(int64_t rank) const;
};

// Requires: the degrees passed check_parallelism and data_parallel_degree for `world`.
DataParallelPlan data_parallel_plan(const Config& config, int64_t world);

}  // namespace titan
