// The processes of one run and the collectives between them.
//
// Only the single-process group exists today. The run context builds it before the determinism
// controller, so that a multi-process group will be able to agree on the seed before anything is
// seeded.
#pragma once

#include <cstdint>
#include <memory>

#include "distributed/world.h"

namespace titan {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
};

// The group `world` describes. Throws ConfigError (exit 2) for a world of more than one process:
// multi-process data parallelism is not available yet.
std::unique_ptr<ProcessGroup> make_process_group(const WorldInfo& world);

}  // namespace titan
