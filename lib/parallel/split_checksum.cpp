// Contract in split_checksum.h.
#include "parallel/split_checksum.h"

#include <algorithm>
#include <cstring>

#include "util/hash.h"

namespace titan {
namespace {

constexpr auto kChunk = static_cast<int64_t>(kHashChunkBytes);
// The most one exchange of the chunks that span ranks holds, for all ranks together.
constexpr int64_t kBatchBytes = int64_t{2} << 20;

// What a rank sends of one tensor: the hashes of the chunks wholly in its range, and its bytes
// before them (`head`) and after them (`tail`); all of them are head when no chunk is whole.
struct LocalPart {
  std::vector<uint64_t> hashes;
  int64_t head = 0, tail = 0;
};

LocalPart local_part(const BytesRange& t) {
  LocalPart part;
  const int64_t size = t.bytes.numel(), end = t.begin + size;
  const int64_t first = (t.begin + kChunk - 1) / kChunk * kChunk;  // the first chunk in range
  // Its whole chunks end at a chunk boundary, or at the tensor's end (a shorter last chunk).
  const int64_t last =
      end == t.total ? end : first + std::max<int64_t>(0, end - first) / kChunk * kChunk;
  if (t.total <= kChunk || first >= last) {
    part.head = size;
    return part;
  }
  part.head = first - t.begin;
  part.tail = end - last;
  part.hashes =
      chunk_hashes(t.bytes.data_ptr<uint8_t>() + part.head, static_cast<size_t>(last - first));
  return part;
}

// The chunk hashes of a tensor's bytes, fed in order as hashes of whole chunks and bytes.
class ChunkAssembler {
 public:
  void bytes(const uint8_t* p, int64_t n) {
    while (n > 0) {
      const int64_t take = std::min<int64_t>(n, kChunk - static_cast<int64_t>(pending_.size()));
      pending_.insert(pending_.end(), p, p + take);
      p += take;
      n -= take;
      if (static_cast<int64_t>(pending_.size()) == kChunk) flush();
    }
  }
  void hashes(const uint64_t* h, int64_t n) { chunks_.insert(chunks_.end(), h, h + n); }
  // hash_bytes of all the bytes fed (`total` of them).
  uint64_t finish(int64_t total) {
    if (total <= kChunk) {  // one chunk, hashed alone (flushed already when exactly a chunk)
      return chunks_.empty() ? hash_bytes(pending_.data(), pending_.size()) : chunks_.front();
    }
    if (!pending_.empty()) flush();
    return hash_of_chunks(static_cast<size_t>(total), chunks_);
  }

 private:
  void flush() {
    chunks_.push_back(hash_bytes(pending_.data(), pending_.size()));
    pending_.clear();
  }
  std::vector<uint8_t> pending_;
  std::vector<uint64_t> chunks_;
};

// Every rank's hash slots, [count, head, tail, hash...] for each tensor, after the exchange.
struct GatheredHashes {
  at::Tensor all;  // (ranks * slots,) int64
  std::vector<int64_t> offset;
  int64_t slots = 0;
  const int64_t* of(int64_t rank, size_t i) const {
    return all.data_ptr<int64_t>() + rank * slots + offset[i];
  }
};

// The exchange of every rank's chunk hashes and head and tail lengths: fixed slots a tensor, the
// same on every rank.
GatheredHashes gather_hashes(ProcessGroup& group, const std::vector<BytesRange>& tensors,
                             const std::vector<LocalPart>& parts) {
  GatheredHashes g;
  for (const auto& t : tensors) {
    g.offset.push_back(g.slots);
    g.slots += 3 + t.largest / kChunk + 1;
  }
  at::Tensor hashes = at::zeros({g.slots}, at::kLong);
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t* slot = hashes.data_ptr<int64_t>() + g.offset[i];
    slot[0] = static_cast<int64_t>(parts[i].hashes.size());
    slot[1] = parts[i].head;
    slot[2] = parts[i].tail;
    std::memcpy(slot + 3, parts[i].hashes.data(), parts[i].hashes.size() * sizeof(uint64_t));
  }
  g.all = at::empty({group.size() * g.slots}, at::kLong);
  // Every rank lays out alike, so an empty exchange is skipped on all of them.
  if (g.slots > 0) group.start_all_gather(g.all, hashes, "the params checksum")->wait();
  return g;
}

// Tensors [first, end): their chunks that span ranks exchanged (each tensor's slot as long as
// the longest rank's head and tail, `slot_bytes`), and each one's hash_bytes combined into `h`.
// `exchange` is the buffers every batch uses, sized for the largest: one size a call, so that
// the collective's own buffers of one exchange are reused by the next rather than left as holes.
struct ExchangeBuffers {
  at::Tensor bytes;      // (capacity,)
  at::Tensor all_bytes;  // (ranks * capacity,)
};
uint64_t combine_batch(ProcessGroup& group, const std::vector<BytesRange>& tensors,
                       const std::vector<LocalPart>& parts, const GatheredHashes& hashes,
                       const std::vector<int64_t>& slot_bytes, size_t first, size_t end,
                       ExchangeBuffers& exchange, uint64_t h) {
  const int64_t ranks = group.size();
  std::vector<int64_t> byte_offset;  // each tensor's slot in a rank's block of the exchange
  int64_t used = 0;
  for (size_t i = first; i < end; ++i) {
    byte_offset.push_back(used);
    used += slot_bytes[i];
  }
  at::Tensor& bytes = exchange.bytes;
  const int64_t byte_slots = bytes.numel();  // a rank's block: the capacity, whatever `used` is
  for (size_t i = first; i < end; ++i) {
    const uint8_t* from = tensors[i].bytes.data_ptr<uint8_t>();
    uint8_t* to = bytes.data_ptr<uint8_t>() + byte_offset[i - first];
    std::memcpy(to, from, static_cast<size_t>(parts[i].head));
    std::memcpy(to + parts[i].head, from + tensors[i].bytes.numel() - parts[i].tail,
                static_cast<size_t>(parts[i].tail));
  }
  at::Tensor& all_bytes = exchange.all_bytes;
  if (byte_slots > 0) group.start_all_gather(all_bytes, bytes, "the params checksum")->wait();
  for (size_t i = first; i < end; ++i) {
    ChunkAssembler chunks;
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t* slot = hashes.of(r, i);
      const uint8_t* edge = all_bytes.data_ptr<uint8_t>() + r * byte_slots + byte_offset[i - first];
      chunks.bytes(edge, slot[1]);
      chunks.hashes(reinterpret_cast<const uint64_t*>(slot + 3), slot[0]);
      chunks.bytes(edge + slot[1], slot[2]);
    }
    h = hash_combine(h, chunks.finish(tensors[i].total));
  }
  return h;
}

}  // namespace

uint64_t split_tensors_checksum(ProcessGroup& group, const std::vector<BytesRange>& tensors) {
  const int64_t ranks = group.size();
  std::vector<LocalPart> parts;
  for (const auto& t : tensors) parts.push_back(local_part(t));
  const GatheredHashes hashes = gather_hashes(group, tensors, parts);
  // Then the bytes of the chunks that span ranks, in batches of tensors whose exchange holds at
  // most kBatchBytes for all ranks together (or one tensor's), so that what a rank holds for it
  // does not grow with the model.
  std::vector<int64_t> slot_bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t longest = 0;
    for (int64_t r = 0; r < ranks; ++r)
      longest = std::max(longest, hashes.of(r, i)[1] + hashes.of(r, i)[2]);
    slot_bytes.push_back(longest);
  }
  std::vector<size_t> batch_ends;
  int64_t capacity = 0;
  for (size_t first = 0; first < tensors.size();) {
    size_t end = first + 1;
    int64_t batch = slot_bytes[first];
    while (end < tensors.size() && (batch + slot_bytes[end]) * ranks <= kBatchBytes)
      batch += slot_bytes[end++];
    batch_ends.push_back(end);
    capacity = std::max(capacity, batch);
    first = end;
  }
  ExchangeBuffers exchange{at::zeros({capacity}, at::kByte),
                           at::empty({ranks * capacity}, at::kByte)};
  uint64_t h = tensors.size();  // tensors_checksum's seed: the number of tensors
  size_t first = 0;
  for (size_t end : batch_ends) {
    h = combine_batch(group, tensors, parts, hashes, slot_bytes, first, end, exchange, h);
    first = end;
  }
  return h;
}

}  // namespace titan
