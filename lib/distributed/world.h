// Where this process sits in a multi-process job, from the launcher's environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

// The port rank 0's rendezvous store listens on when MASTER_PORT is unset (torchrun's default).
constexpr int kDefaultMasterPort = 29500;

// The most processes a run may have: c10d's store and Gloo keep a connection per rank, and
// torchrun and Slurm jobs stay far below this.
constexpr int64_t kMaxWorldSize = 1 << 20;

struct WorldInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";  // where rank 0 serves the rendezvous store
  int master_port = kDefaultMasterPort;
  std::string launcher = "none";         // "torchrun", "slurm" or "none"
  std::vector<int64_t> log_ranks = {0};  // LOG_RANK: the ranks that print the console lines

  bool logs_console() const;
};

// torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT, else
// Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE with the first
// host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) as the master address (MASTER_ADDR and
// MASTER_PORT still win when set), else a single process. LOG_RANK is a comma-separated list of
// ranks (default 0). Throws ConfigError naming the variable for values that do not parse, a rank
// outside [0, world_size), a world larger than kMaxWorldSize or than the open-file limit can hold
// (the soft limit is raised to what the world needs where the hard limit allows), or a
// multi-process world without a master address.
WorldInfo world_from_environment();

// The first host name of a Slurm node list, as `scontrol show hostnames` would print it first:
// "node[07-09,12],gpu1" -> "node07", "rack[2-3]-n[5]" -> "rack2-n5". Throws ConfigError naming
// `variable` for an unbalanced bracket or an empty list.
std::string first_host_of_nodelist(const std::string& nodelist, const std::string& variable);

// This machine's host name (gethostname), or "localhost" when it has none.
std::string host_name();

}  // namespace titan
