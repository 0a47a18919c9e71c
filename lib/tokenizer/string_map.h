// Flat open-addressing hash maps for the tokenizer's hot lookups: byte strings to token ids
// (looked up by string_view, no allocation) and token-id pairs to merges.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace titan {

// A 64-bit hash of a short byte string (8 bytes at a time, then a final mix).
inline uint64_t hash_bytes_fast(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = s.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * kMul;
  h ^= h >> 32;
  return h * 0xD6E8FEB86659FD93ull;
}

// Byte string -> non-negative int32 value (no erase). insert() keeps the first value unless
// `overwrite`.
class StringIdMap {
 public:
  static constexpr int32_t kMissing = -1;

  void reserve(size_t n) { rehash(capacity_for(n)); }
  size_t size() const { return size_; }

  // Returns true when the key was new.
  bool insert(std::string_view key, int32_t value, bool overwrite) {
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(capacity_for(size_ + 1));
    const uint64_t h = hash_bytes_fast(key);
    size_t i = h & mask_;
    while (slots_[i].value != kMissing) {
      if (slots_[i].hash == h && view(slots_[i]) == key) {
        if (overwrite) slots_[i].value = value;
        return false;
      }
      i = (i + 1) & mask_;
    }
    Slot& s = slots_[i];
    s.hash = h;
    s.offset = static_cast<uint32_t>(arena_.size());
    s.length = static_cast<uint32_t>(key.size());
    s.value = value;
    arena_.append(key.data(), key.size());
    ++size_;
    return true;
  }

  int32_t find(std::string_view key) const {
    if (size_ == 0) return kMissing;
    const uint64_t h = hash_bytes_fast(key);
    size_t i = h & mask_;
    while (slots_[i].value != kMissing) {
      if (slots_[i].hash == h && view(slots_[i]) == key) return slots_[i].value;
      i = (i + 1) & mask_;
    }
    return kMissing;
  }

  // Calls f(key, value) for every entry.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.value != kMissing) f(view(s), s.value);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0, length = 0;
    int32_t value = kMissing;
  };
  std::string_view view(const Slot& s) const { return {arena_.data() + s.offset, s.length}; }
  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c * 3 < n * 4 + 4) c *= 2;
    return c;
  }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.value == kMissing) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].value != kMissing) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string arena_;
};

// (left id, right id) -> (rank, merged id). insert() overwrites: the last merge listed wins, as
// in Hugging Face's map built from the merges list.
class PairMap {
 public:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };

  void reserve(size_t n) { rehash(capacity_for(n)); }
  size_t size() const { return size_; }

  void insert(int32_t a, int32_t b, Merge m) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    const uint64_t k = key(a, b);
    size_t i = mix(k) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == k) {
        slots_[i].merge = m;
        return;
      }
      i = (i + 1) & mask_;
    }
    slots_[i] = {k, m};
    ++size_;
  }

  // Null when the pair has no merge.
  const Merge* find(int32_t a, int32_t b) const {
    if (size_ == 0) return nullptr;
    const uint64_t k = key(a, b);
    size_t i = mix(k) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == k) return &slots_[i].merge;
      i = (i + 1) & mask_;
    }
    return nullptr;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return k;
  }
  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c < n * 2 + 2) c *= 2;
    return c;
  }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = mix(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace titan
