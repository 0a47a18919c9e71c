// tensors_checksum of tensors whose bytes are split over the ranks of a group, each rank holding
// one consecutive range of each tensor's bytes, in rank order (FSDP's shards of a parameter:
// rank r's rows follow rank r - 1's), without moving the tensors: each rank hashes the 1 MiB
// chunks of hash_bytes that lie wholly in its range, and only those hashes and the bytes of the
// chunks that span two ranks are exchanged (under 2 MiB a tensor and rank, in exchanges of
// at most 2 MiB for all ranks together, or one tensor's).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "distributed/process_group.h"

namespace titan {

// This rank's range of one tensor's bytes.
struct BytesRange {
  int64_t total = 0;    // the whole tensor's bytes
  int64_t begin = 0;    // where this rank's range starts in them
  at::Tensor bytes;     // (end - begin,) uint8 on the CPU: the range's bytes, in order
  int64_t largest = 0;  // the longest range any rank holds of it (the same on every rank)
};

// Equals tensors_checksum of the whole CPU tensors, in order (collective: every rank calls it
// with the same tensors' ranges, which together cover each tensor once, in rank order).
uint64_t split_tensors_checksum(ProcessGroup& group, const std::vector<BytesRange>& tensors);

}  // namespace titan
