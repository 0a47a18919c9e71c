// Fast 64-bit hashing of raw bytes, for checksums of tensors (fingerprint.log, the bitwise
// recompute check). Not cryptographic: it detects accidental differences.
#pragma once

#include <cstddef>
#include <cstdint>

namespace titan {

// Hash of n bytes. Equal bytes give equal hashes; any difference in one 8-byte word changes the
// hash. Large buffers are split into fixed 1 MiB chunks hashed in parallel (at::parallel_for)
// and combined in order, so the result does not depend on the thread count.
uint64_t hash_bytes(const void* data, size_t n);

// Order-dependent combination of two hashes.
uint64_t hash_combine(uint64_t seed, uint64_t value);

}  // namespace titan
