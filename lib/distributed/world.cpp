#include "distributed/world.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "util/error.h"

namespace titan {
namespace {

bool read_int(const char* name, int64_t& out) {
  const char* text = std::getenv(name);
  if (!text) return false;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0') {
    throw ConfigError(fmt::format("environment variable {}", name),
                      fmt::format("\"{}\" is not an integer", text));
  }
  out = v;
  return true;
}

}  // namespace

WorldInfo world_from_environment() {
  WorldInfo w;
  const bool torchrun = read_int("WORLD_SIZE", w.world_size);
  if (torchrun) {
    read_int("RANK", w.rank);
    read_int("LOCAL_RANK", w.local_rank);
  } else if (read_int("SLURM_NTASKS", w.world_size)) {
    read_int("SLURM_PROCID", w.rank);
    read_int("SLURM_LOCALID", w.local_rank);
  }
  if (w.world_size < 1 || w.rank < 0 || w.rank >= w.world_size) {
    throw ConfigError("environment",
                      fmt::format("rank {} is outside a world of size {}", w.rank, w.world_size),
                      "check RANK/WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS)");
  }
  return w;
}

}  // namespace titan
