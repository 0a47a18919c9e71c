#include "distributed/process_group.h"

#include <fmt/format.h>

#include "util/error.h"

namespace titan {
namespace {

class SingleProcessGroup : public ProcessGroup {
 public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
};

}  // namespace

std::unique_ptr<ProcessGroup> make_process_group(const WorldInfo& world) {
  if (world.world_size > 1) {
    throw ConfigError("environment",
                      fmt::format("this is rank {} of {} processes, but multi-process "
                                  "data-parallel training is not available yet",
                                  world.rank, world.world_size),
                      "run a single process (srun --ntasks=1, or torchrun --nproc_per_node=1)");
  }
  return std::make_unique<SingleProcessGroup>();
}

}  // namespace titan
