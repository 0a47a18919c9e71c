#include "distributed/world.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

const char* env(const char* name) {
  const char* text = std::getenv(name);
  return text && *text ? text : nullptr;
}

bool read_int(const char* name, int64_t& out) {
  const char* text = env(name);
  if (!text) return false;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*end != '\0') {
    throw ConfigError(fmt::format("environment variable {}", name),
                      fmt::format("\"{}\" is not an integer", text));
  }
  out = v;
  return true;
}

std::vector<int64_t> parse_log_ranks(const char* text) {
  std::vector<int64_t> ranks;
  for (const auto& item : split_list(text, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) {
      throw ConfigError(
          "environment variable LOG_RANK",
          fmt::format("\"{}\" is not a rank or a comma-separated list of ranks", text),
          "e.g. LOG_RANK=0 or LOG_RANK=0,1");
    }
    ranks.push_back(v);
  }
  return ranks;
}

void read_master(WorldInfo& w) {
  if (const char* addr = env("MASTER_ADDR")) w.master_addr = addr;
  int64_t port = 0;
  if (read_int("MASTER_PORT", port)) {
    if (port < 1 || port > 65535) {
      throw ConfigError("environment variable MASTER_PORT",
                        fmt::format("{} is not a TCP port (1-65535)", port));
    }
    w.master_port = static_cast<int>(port);
  }
}

void read_slurm(WorldInfo& w) {
  w.launcher = "slurm";
  read_int("SLURM_PROCID", w.rank);
  read_int("SLURM_LOCALID", w.local_rank);
  w.local_world_size = w.world_size;
  int64_t nodes = 0;
  if (read_int("SLURM_STEP_NUM_NODES", nodes) || read_int("SLURM_JOB_NUM_NODES", nodes)) {
    w.local_world_size = nodes > 0 ? (w.world_size + nodes - 1) / nodes : w.world_size;
  }
  const char* nodelist_variable =
      env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  if (const char* nodelist = env(nodelist_variable)) {
    w.master_addr = first_host_of_nodelist(nodelist, nodelist_variable);
  }
}

}  // namespace

bool WorldInfo::logs_console() const {
  return std::find(log_ranks.begin(), log_ranks.end(), rank) != log_ranks.end();
}

std::string first_host_of_nodelist(const std::string& nodelist, const std::string& variable) {
  auto fail = [&](const std::string& why) {
    return ConfigError(fmt::format("environment variable {}", variable),
                       fmt::format("\"{}\": {}", nodelist, why),
                       "set MASTER_ADDR to rank 0's host name");
  };
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) throw fail("unbalanced '['");
    // The first number of the first range keeps its zero padding: node[07-09] -> node07.
    const std::string ranges = nodelist.substr(i + 1, close - i - 1);
    const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
      throw fail(fmt::format("\"[{}]\" is not a list of numbers", ranges));
    }
    host += first;
    i = close + 1;
  }
  if (host.empty()) throw fail("no host name");
  return host;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

namespace {

// The launcher's variables must describe one process of one world: torchrun's RANK, LOCAL_RANK
// and LOCAL_WORLD_SIZE only with WORLD_SIZE, each within the others' bounds.
void check_world(const WorldInfo& w) {
  const std::string hint =
      "check RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun sets "
      "them all) or SLURM_PROCID/SLURM_NTASKS";
  if (!env("WORLD_SIZE")) {
    for (const char* name : {"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
      if (env(name) && !env("SLURM_NTASKS")) {
        throw ConfigError(fmt::format("environment variable {}", name),
                          "is set but WORLD_SIZE is not", hint);
      }
    }
  }
  if (w.world_size > kMaxWorldSize) {
    throw ConfigError("environment",
                      fmt::format("a world of {} processes is more than titan-train's rendezvous "
                                  "holds ({} at most)",
                                  w.world_size, kMaxWorldSize),
                      hint);
  }
  if (w.world_size < 1 || w.rank < 0 || w.rank >= w.world_size) {
    throw ConfigError("environment",
                      fmt::format("rank {} is outside a world of size {}", w.rank, w.world_size),
                      hint);
  }
  if (w.local_world_size < 1 || w.local_world_size > w.world_size) {
    throw ConfigError("environment",
                      fmt::format("{} processes on this node (LOCAL_WORLD_SIZE) in a world of {}",
                                  w.local_world_size, w.world_size),
                      hint);
  }
  if (w.local_rank < 0 || w.local_rank >= w.local_world_size || w.local_rank > w.rank) {
    throw ConfigError("environment",
                      fmt::format("local rank {} does not fit rank {} with {} processes on this "
                                  "node (LOCAL_RANK, RANK, LOCAL_WORLD_SIZE)",
                                  w.local_rank, w.rank, w.local_world_size),
                      hint);
  }
}

// Rank 0's store keeps two connections per rank (its requests, its heartbeat) and Gloo one per
// peer: a world needs about three descriptors a rank on rank 0. Raises the soft limit to what
// the world needs when the hard limit allows it; refuses a world it cannot hold.
void check_descriptor_limit(const WorldInfo& w) {
  if (w.world_size == 1) return;
  const rlim_t needed = static_cast<rlim_t>(w.world_size) * (w.rank == 0 ? 3 : 1) + 256;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    throw ConfigError("environment",
                      fmt::format("a world of {} processes needs about {} open files on rank {}, "
                                  "and this process may open {} (ulimit -Hn)",
                                  w.world_size, needed, w.rank, limit.rlim_max),
                      "raise the hard limit on open files (ulimit -n, or LimitNOFILE in the "
                      "launcher's service), or start fewer processes");
  }
  limit.rlim_cur = needed;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

WorldInfo world_from_environment() {
  WorldInfo w;
  if (read_int("WORLD_SIZE", w.world_size)) {
    w.launcher = "torchrun";
    read_int("RANK", w.rank);
    read_int("LOCAL_RANK", w.local_rank);
    w.local_world_size = w.world_size;
    read_int("LOCAL_WORLD_SIZE", w.local_world_size);
  } else if (read_int("SLURM_NTASKS", w.world_size)) {
    read_slurm(w);
  }
  read_master(w);
  if (const char* log_rank = env("LOG_RANK")) w.log_ranks = parse_log_ranks(log_rank);
  check_world(w);
  check_descriptor_limit(w);
  return w;
}

}  // namespace titan
