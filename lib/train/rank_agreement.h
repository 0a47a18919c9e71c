// Checks that the ranks of a multi-process run are replicas of one computation (internal to
// lib/train). Each is an exchange through the rendezvous store (a gather to rank 0, its verdict
// broadcast), so every rank stops together, naming the ranks that differ.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "distributed/process_group.h"

namespace titan {

// Before anything is built: every rank's config must agree with rank 0's on every key but those
// a process may set for itself (FieldSpec::may_differ_between_ranks: threads, console output) and
// those without effect: a key outside the config hash can still change which collectives a rank
// runs or which files it writes. Throws ConfigError (exit 2) naming each differing rank with the
// keys and both values. No-op for one process.
void check_ranks_agree(const Config& config, ProcessGroup& group);

// The replicas' parameter checksums (tensors_checksum) after `step` (0: before the first step)
// must be one. Throws, naming each rank whose checksum differs from rank 0's: RuntimeFailure at
// step 0 (they started apart: a set-up problem), CheckFailure (exit 3) after a step (they
// parted while training). No-op for one process.
void check_replicas_agree(ProcessGroup& group, uint64_t checksum, int64_t step);

}  // namespace titan
