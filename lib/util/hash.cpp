#include "util/hash.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace titan {
namespace {

constexpr uint64_t kPrime = 0x100000001b3ull;  // FNV-1a's 64-bit prime
constexpr size_t kChunk = kHashChunkBytes;

// splitmix64's finalizer: every output bit depends on every input bit.
uint64_t avalanche(uint64_t h) {
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// Four independent FNV-1a lanes over 8-byte words, so the multiplies overlap instead of
// waiting on each other; then the tail bytes.
uint64_t hash_chunk(const unsigned char* p, size_t n) {
  uint64_t lane[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull, n};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    for (int k = 0; k < 4; ++k) lane[k] = (lane[k] ^ w[k]) * kPrime;
  }
  uint64_t h = hash_combine(hash_combine(lane[0], lane[1]), hash_combine(lane[2], lane[3]));
  for (; i < n; ++i) h = (h ^ p[i]) * kPrime;
  return avalanche(h);
}

// Appends the hashes of the consecutive kChunk pieces of p[0, n) (the last may be shorter),
// computed in parallel.
void append_chunk_hashes(const unsigned char* p, size_t n, std::vector<uint64_t>& hashes) {
  const size_t first = hashes.size();
  const auto chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  hashes.resize(first + static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const size_t offset = static_cast<size_t>(c) * kChunk;
      hashes[first + static_cast<size_t>(c)] = hash_chunk(p + offset, std::min(kChunk, n - offset));
    }
  });
}

}  // namespace

uint64_t splitmix64(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ull;
  return avalanche(state);
}

uint64_t tensor_checksum(const at::Tensor& t) {
  if (!t.device().is_cpu()) return words_checksum(t);
  at::DisableRecordFunctionGuard no_recording;
  const at::Tensor host = t.is_contiguous() ? t : t.contiguous();
  return hash_bytes(host.data_ptr(), host.nbytes());
}

namespace {

// The tensor's bytes as int64 words, zero-padded to a whole word: a copy where the bytes do not
// start on a word boundary or do not fill the last word.
at::Tensor as_words(const at::Tensor& t) {
  at::Tensor bytes = t.contiguous().view({-1}).view(at::kByte);  // (nbytes,)
  const int64_t pad = (8 - bytes.numel() % 8) % 8;
  if (pad > 0) {
    bytes = at::constant_pad_nd(bytes, {0, pad}, 0);
  } else if (bytes.storage_offset() % 8 != 0) {
    bytes = bytes.clone();
  }
  return bytes.view(at::kLong);  // (words,)
}

// Bit patterns of the mixing constants as int64 (ATen's integer arithmetic wraps).
int64_t as_int64(uint64_t bits) {
  int64_t v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace

uint64_t words_checksum(const at::Tensor& t) {
  at::DisableRecordFunctionGuard no_recording;
  const at::Tensor words = as_words(t.detach());
  const int64_t n = words.numel();
  // Chunks bound the temporaries (a 1 GB embedding would need 2 GB of them at once).
  constexpr int64_t kWordsPerChunk = int64_t(1) << 24;
  const auto index_options = at::TensorOptions().dtype(at::kLong).device(words.device());
  at::Tensor total = at::zeros({}, index_options);
  for (int64_t begin = 0; begin < n; begin += kWordsPerChunk) {
    const int64_t end = std::min(n, begin + kWordsPerChunk);
    // An odd multiplier per index: w -> w * k is a bijection, and so is each step after it.
    at::Tensor k = at::arange(begin, end, index_options).mul_(2).add_(1);
    k.mul_(as_int64(0x9e3779b97f4a7c15ull));
    at::Tensor m = words.slice(0, begin, end).mul(k);
    m.bitwise_xor_(m.bitwise_right_shift(32).bitwise_and_(int64_t{0xffffffff}));  // logical shift
    m.mul_(as_int64(0xbf58476d1ce4e5b9ull));
    total.add_(m.sum());
  }
  return hash_combine(static_cast<uint64_t>(t.nbytes()),
                      static_cast<uint64_t>(total.item<int64_t>()));
}

uint64_t tensors_checksum(const std::vector<at::Tensor>& tensors) {
  uint64_t h = tensors.size();
  for (const auto& t : tensors) h = hash_combine(h, tensor_checksum(t.detach()));
  return h;
}

uint64_t hash_combine(uint64_t seed, uint64_t value) {
  return avalanche(seed ^ (value + 0x9e3779b97f4a7c15ull));
}

uint64_t hash_bytes(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (n <= kChunk) return hash_chunk(p, n);
  return hash_of_chunks(n, chunk_hashes(data, n));
}

std::vector<uint64_t> chunk_hashes(const void* data, size_t n) {
  std::vector<uint64_t> hashes;
  append_chunk_hashes(static_cast<const unsigned char*>(data), n, hashes);
  return hashes;
}

uint64_t hash_of_chunks(size_t n, const std::vector<uint64_t>& chunk_hashes) {
  uint64_t h = n;
  for (uint64_t x : chunk_hashes) h = hash_combine(h, x);
  return h;
}

void StreamingHash::update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_ += n;
  if (!pending_.empty()) {
    const size_t take = std::min(n, kChunk - pending_.size());
    pending_.append(reinterpret_cast<const char*>(p), take);
    p += take;
    n -= take;
    if (pending_.size() < kChunk) return;
    chunk_hashes_.push_back(
        hash_chunk(reinterpret_cast<const unsigned char*>(pending_.data()), kChunk));
    pending_.clear();
  }
  const size_t whole = n - n % kChunk;
  if (whole > 0) append_chunk_hashes(p, whole, chunk_hashes_);
  pending_.assign(reinterpret_cast<const char*>(p + whole), n - whole);
}

uint64_t StreamingHash::digest() const {
  const auto* rest = reinterpret_cast<const unsigned char*>(pending_.data());
  if (size_ <= kChunk)
    return chunk_hashes_.empty() ? hash_chunk(rest, pending_.size()) : chunk_hashes_[0];
  uint64_t h = size_;
  for (uint64_t x : chunk_hashes_) h = hash_combine(h, x);
  if (!pending_.empty()) h = hash_combine(h, hash_chunk(rest, pending_.size()));
  return h;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace titan
