// The multi-process ProcessGroup on c10d's NCCL backend (internal to lib/distributed), compiled
// where libtorch has it (USE_C10D_NCCL: a CUDA libtorch built with NCCL).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace titan {

// Rendezvous as the Gloo group does (StoreGroup), then a ProcessGroupNCCL summing tensors on
// `device`. `settings` are apply_nccl_environment's, for the group's description. Throws
// ConfigError in a build without NCCL.
std::unique_ptr<ProcessGroup> make_nccl_group(const WorldInfo& world, const CommConfig& comm,
                                              const c10::Device& device,
                                              std::vector<std::string> settings);

}  // namespace titan
