// Contract in split_checksum.h.
#include "parallel/split_checksum.h"

#include <algorithm>
#include <cstring>

#include "util/hash.h"

namespace titan {
namespace {

constexpr auto kChunk = static_cast<int64_t>(kHashChunkBytes);

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

}  // namespace

uint64_t split_tensors_checksum(ProcessGroup& group, const std::vector<BytesRange>& tensors) {
  const int64_t ranks = group.size();
  // First the hashes: fixed slots a tensor, the same on every rank, [count, head, tail, hash...].
  std::vector<LocalPart> parts;
  std::vector<int64_t> hash_offset;
  int64_t hash_slots = 0;
  for (const auto& t : tensors) {
    parts.push_back(local_part(t));
    hash_offset.push_back(hash_slots);
    hash_slots += 3 + t.largest / kChunk + 1;
  }
  at::Tensor hashes = at::zeros({hash_slots}, at::kLong);
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t* slot = hashes.data_ptr<int64_t>() + hash_offset[i];
    slot[0] = static_cast<int64_t>(parts[i].hashes.size());
    slot[1] = parts[i].head;
    slot[2] = parts[i].tail;
    std::memcpy(slot + 3, parts[i].hashes.data(), parts[i].hashes.size() * sizeof(uint64_t));
  }
  at::Tensor all_hashes = at::empty({ranks * hash_slots}, at::kLong);
  // Every rank lays out alike, so an empty exchange is skipped on all of them.
  if (hash_slots > 0) group.start_all_gather(all_hashes, hashes, "the params checksum")->wait();
  auto slot_of = [&](int64_t rank, size_t i) {
    return all_hashes.data_ptr<int64_t>() + rank * hash_slots + hash_offset[i];
  };
  // Then the bytes of the chunks that span ranks, each tensor's slot as long as the longest
  // rank's head and tail (known to every rank now).
  std::vector<int64_t> byte_offset;
  int64_t byte_slots = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    byte_offset.push_back(byte_slots);
    int64_t longest = 0;
    for (int64_t r = 0; r < ranks; ++r)
      longest = std::max(longest, slot_of(r, i)[1] + slot_of(r, i)[2]);
    byte_slots += longest;
  }
  at::Tensor bytes = at::zeros({byte_slots}, at::kByte);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint8_t* from = tensors[i].bytes.data_ptr<uint8_t>();
    uint8_t* to = bytes.data_ptr<uint8_t>() + byte_offset[i];
    std::memcpy(to, from, static_cast<size_t>(parts[i].head));
    std::memcpy(to + parts[i].head, from + tensors[i].bytes.numel() - parts[i].tail,
                static_cast<size_t>(parts[i].tail));
  }
  at::Tensor all_bytes = at::empty({ranks * byte_slots}, at::kByte);
  if (byte_slots > 0) group.start_all_gather(all_bytes, bytes, "the params checksum")->wait();

  uint64_t h = tensors.size();  // tensors_checksum's seed: the number of tensors
  for (size_t i = 0; i < tensors.size(); ++i) {
    ChunkAssembler chunks;
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t* slot = slot_of(r, i);
      const uint8_t* edge = all_bytes.data_ptr<uint8_t>() + r * byte_slots + byte_offset[i];
      chunks.bytes(edge, slot[1]);
      chunks.hashes(reinterpret_cast<const uint64_t*>(slot + 3), slot[0]);
      chunks.bytes(edge + slot[1], slot[2]);
    }
    h = hash_combine(h, chunks.finish(tensors[i].total));
  }
  return h;
}

}  // namespace titan
