// Where this process sits in a multi-process job, from the launcher's environment.
#pragma once

#include <cstdint>

namespace titan {

struct WorldInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
};

// torchrun's RANK / WORLD_SIZE / LOCAL_RANK, else Slurm's SLURM_PROCID / SLURM_NTASKS /
// SLURM_LOCALID, else a single process. Throws ConfigError for values that do not parse or
// a rank outside [0, world_size).
WorldInfo world_from_environment();

}  // namespace titan
