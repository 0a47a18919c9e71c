// Fast 64-bit hashing of raw bytes, for checksums of tensors (fingerprint.log, the bitwise
// recompute check). Not cryptographic: it detects accidental differences.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace titan {

// Hash of n bytes. Equal bytes give equal hashes; any difference in one 8-byte word changes the
// hash. Large buffers are split into fixed 1 MiB chunks hashed in parallel (at::parallel_for)
// and combined in order, so the result does not depend on the thread count.
uint64_t hash_bytes(const void* data, size_t n);

// hash_bytes in pieces that lie apart (FSDP's shards of one parameter, on several ranks): for
// n > kHashChunkBytes, hash_bytes(data, n) == hash_of_chunks(n, H), H the chunk_hashes of the
// consecutive pieces of the n bytes in order, where every piece but the last is a whole number
// of kHashChunkBytes. (For n <= kHashChunkBytes there is one chunk, hashed without combining.)
constexpr size_t kHashChunkBytes = size_t(1) << 20;
std::vector<uint64_t> chunk_hashes(const void* data, size_t n);
uint64_t hash_of_chunks(size_t n, const std::vector<uint64_t>& chunk_hashes);

// hash_bytes over bytes that arrive in pieces (a file being written): after update() with the
// pieces p1, p2, ..., digest() equals hash_bytes of their concatenation, whatever the pieces.
class StreamingHash {
 public:
  void update(const void* data, size_t n);
  uint64_t digest() const;
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> chunk_hashes_;  // of the complete 1 MiB chunks so far
  std::string pending_;                 // the bytes after them (less than a chunk)
  size_t size_ = 0;
};

// Order-dependent combination of two hashes.
uint64_t hash_combine(uint64_t seed, uint64_t value);

// The splitmix64 generator: advances `state` and returns the next well-mixed 64-bit value.
uint64_t splitmix64(uint64_t& state);

// Hash of a tensor's bytes, computed where the tensor lives: hash_bytes for a CPU tensor,
// words_checksum for any other, so that no step copies a model to the host (a 1B model's
// per-step params checksum cost 5 s a step on an H200 that way). Checksums therefore compare
// only between tensors on the same kind of device. Runs no op that an at::RecordFunction observer
// (the AC op trace) would record.
uint64_t tensor_checksum(const at::Tensor& t);

// Hash of a tensor's bytes (in its logical order) by ATen ops on its own device: the bytes are
// read as 64-bit words, each word mixed with its index by bijective steps and the mixed words
// summed modulo 2^64. Integer sums do not depend on the order of reduction, so the result is the
// same on every device and thread count; any change to one word changes it.
uint64_t words_checksum(const at::Tensor& t);

// Order-dependent checksum of `tensors`: equal exactly when every tensor's bytes are equal (up to
// hash collisions), independent of the thread count.
uint64_t tensors_checksum(const std::vector<at::Tensor>& tensors);

// Whether `a` and `b` are the same bits: NaNs with the same payload are, +0.0 and -0.0 are not.
bool same_bits(double a, double b);

}  // namespace titan
