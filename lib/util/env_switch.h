// titan-train's own environment switches: each accepts a few spelled-out values, and anything
// else is refused at start (a typo such as TITAN_MALLOC_TUNING=off must not pass for "on").
#pragma once

#include <string>

namespace titan {

enum class EnvSwitch {
  kMallocTuning,  // TITAN_MALLOC_TUNING: 1 (default) or 0, glibc's malloc defaults
  kFsdpPrefetch,  // TITAN_FSDP_PREFETCH: 1 (default) or 0, no prefetch of the next unit
  kProfiler,      // TITAN_PROFILER: libtorch (default) or titan, titan-train's op recorder
};

// The switch's value, its default when the variable is unset. Throws ConfigError naming the
// variable, its value and the values it accepts for anything else.
std::string env_switch(EnvSwitch which);

// Checks every switch; main calls it before any subcommand reads a file or writes one.
void check_env_switches();

}  // namespace titan
