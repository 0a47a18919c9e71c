#include "util/env_switch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "util/error.h"

namespace titan {
namespace {

struct SwitchSpec {
  EnvSwitch which;
  const char* name;
  std::vector<const char*> values;  // the first is the default
};

const std::vector<SwitchSpec>& switch_specs() {
  static const std::vector<SwitchSpec> specs = {
      {EnvSwitch::kMallocTuning, "TITAN_MALLOC_TUNING", {"1", "0"}},
      {EnvSwitch::kFsdpPrefetch, "TITAN_FSDP_PREFETCH", {"1", "0"}},
      {EnvSwitch::kProfiler, "TITAN_PROFILER", {"libtorch", "titan"}},
  };
  return specs;
}

std::string value_of(const SwitchSpec& spec) {
  const char* text = std::getenv(spec.name);
  if (!text) return spec.values.front();
  for (const char* value : spec.values) {
    if (std::string(text) == value) return value;
  }
  throw ConfigError(spec.name,
                    fmt::format("\"{}\" is not one of {} (default {})", text,
                                fmt::join(spec.values, ", "), spec.values.front()),
                    fmt::format("set {} to one of these, or unset it", spec.name));
}

}  // namespace

std::string env_switch(EnvSwitch which) {
  for (const SwitchSpec& spec : switch_specs()) {
    if (spec.which == which) return value_of(spec);
  }
  throw std::logic_error("env_switch: a switch without a spec");
}

void check_env_switches() {
  for (const SwitchSpec& spec : switch_specs()) value_of(spec);
}

}  // namespace titan
