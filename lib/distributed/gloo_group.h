// The multi-process ProcessGroup on c10d's Gloo backend (internal to lib/distributed).
#pragma once

#include <memory>

#include "distributed/process_group.h"

namespace titan {

// Rendezvous through a c10d::TCPStore at world.master_addr:master_port (rank 0 serves it), then
// a ProcessGroupGloo. Throws RuntimeFailure naming the ranks that did not arrive within
// comm.init_timeout_seconds, or rank 0 when its store cannot be reached.
std::unique_ptr<ProcessGroup> make_gloo_group(const WorldInfo& world, const CommConfig& comm);

}  // namespace titan
