#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <atomic>
#include <queue>
#include <unordered_map>

#include "util/error.h"
#include "util/utf8.h"

namespace titan {
namespace {

constexpr size_t kCacheMaxKey = 256;  // HF caches pieces shorter than this, and so do we
constexpr size_t kCacheMaxEntries = 1 << 17;

std::atomic<uint64_t> next_serial{1};

// A per-thread cache of piece -> ids for one model (results never differ from a fresh merge;
// the cache only saves the work).
struct PieceCache {
  StringIdMap index;  // piece -> entry number
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  std::vector<int32_t> ids;
};

PieceCache& cache_for(uint64_t serial) {
  thread_local std::unordered_map<uint64_t, PieceCache> caches;
  if (caches.size() > 16 && caches.find(serial) == caches.end()) caches.clear();
  return caches[serial];
}

struct HeapEntry {
  uint32_t rank;
  int32_t pos;
  int32_t id;
  bool operator>(const HeapEntry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

uint32_t byte_level_char(unsigned char b) {
  // Printable Latin-1 bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD)
  // take the code points from 256 on, in byte order.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      t[c] = printable ? uint32_t(c) : 256 + n++;
    }
    return t;
  }();
  return table[b];
}

BpeModel::BpeModel(StringIdMap vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeConfig config,
                   const std::string& where)
    : vocab_(std::move(vocab)), config_(std::move(config)), serial_(next_serial++) {
  const size_t prefix_len =
      config_.continuing_subword_prefix ? config_.continuing_subword_prefix->size() : 0;
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t a_id = vocab_.find(a), b_id = vocab_.find(b);
    const std::string& missing = a_id < 0 ? a : b;
    if (a_id < 0 || b_id < 0) {
      throw ConfigError(
          where,
          fmt::format("merge {} (\"{} {}\"): \"{}\" is not in the vocabulary", rank, a, b, missing),
          "the merges must only join tokens of the vocabulary");
    }
    // The merged token: with a continuing-subword prefix, the right part's prefix is dropped.
    joined.assign(a);
    joined.append(b.size() >= prefix_len ? std::string_view(b).substr(prefix_len)
                                         : std::string_view());
    const int32_t id = vocab_.find(joined);
    if (id < 0) {
      throw ConfigError(where,
                        fmt::format("merge {} (\"{} {}\"): the merged token \"{}\" is not in "
                                    "the vocabulary",
                                    rank, a, b, joined),
                        "the merges must produce tokens of the vocabulary");
    }
    merges_.insert(a_id, b_id, {static_cast<uint32_t>(rank), id});
  }
  if (config_.unk_token) {
    unk_id_ = vocab_.find(*config_.unk_token);
    if (unk_id_ < 0) {
      throw ConfigError(
          where, fmt::format("unk_token \"{}\" is not in the vocabulary", *config_.unk_token),
          "add it to the vocabulary or set unk_token to null");
    }
  }
}

BpeModel BpeModel::from_ranks(StringIdMap ranks, const std::string& where) {
  BpeModel m;
  m.serial_ = next_serial++;
  m.vocab_ = std::move(ranks);
  m.config_.ignore_merges = true;  // tiktoken looks a whole piece up before merging
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    m.byte_ids_[b] = m.vocab_.find(std::string_view(&c, 1));
    if (m.byte_ids_[b] < 0) {
      throw ConfigError(where, fmt::format("byte 0x{:02X} has no rank", b),
                        "a tiktoken rank file ranks every single byte");
    }
  }
  // Each way to split a token into two tokens is a merge, ranked by the token.
  m.merges_.reserve(m.vocab_.size() * 2);
  m.vocab_.for_each([&](std::string_view token, int32_t rank) {
    for (size_t k = 1; k < token.size(); ++k) {
      const int32_t a = m.vocab_.find(token.substr(0, k)), b = m.vocab_.find(token.substr(k));
      if (a >= 0 && b >= 0) m.merges_.insert(a, b, {static_cast<uint32_t>(rank), rank});
    }
  });
  m.raw_vocab_ = m.vocab_;
  m.raw_ready_ = true;
  m.raw_ignore_merges_ = true;
  return m;
}

void BpeModel::enable_byte_level_input() {
  if (raw_ready_) return;
  std::unordered_map<uint32_t, unsigned char> char_byte;
  for (int b = 0; b < 256; ++b) char_byte[byte_level_char(static_cast<unsigned char>(b))] = b;
  for (int b = 0; b < 256; ++b) {
    std::string c;
    append_utf8(byte_level_char(static_cast<unsigned char>(b)), c);
    byte_ids_[b] = vocab_.find(c);
  }
  raw_vocab_.reserve(vocab_.size());
  vocab_.for_each([&](std::string_view token, int32_t id) {
    std::string raw;
    size_t i = 0;
    while (i < token.size()) {
      const auto it = char_byte.find(next_code_point(token, i));
      if (it == char_byte.end()) return;  // not a ByteLevel string: no raw spelling
      raw += static_cast<char>(it->second);
    }
    raw_vocab_.insert(raw, id, true);
  });
  raw_ignore_merges_ = config_.ignore_merges;
  raw_ready_ = true;
}

std::string BpeModel::id_to_token(int32_t id) const {
  std::string found;
  vocab_.for_each([&](std::string_view token, int32_t value) {
    if (value == id && found.empty()) found.assign(token);
  });
  return found;
}

bool BpeModel::cached(std::string_view key, bool raw, std::vector<int32_t>& out) const {
  if (key.size() >= kCacheMaxKey) return false;
  const PieceCache& cache = cache_for(serial_ * 2 + raw);
  const int32_t entry = cache.index.find(key);
  if (entry < 0) return false;
  const auto [offset, count] = cache.spans[entry];
  out.insert(out.end(), cache.ids.begin() + offset, cache.ids.begin() + offset + count);
  return true;
}

void BpeModel::remember(std::string_view key, bool raw, const int32_t* ids, size_t n) const {
  if (key.size() >= kCacheMaxKey) return;
  PieceCache& cache = cache_for(serial_ * 2 + raw);
  if (cache.spans.size() >= kCacheMaxEntries) cache = PieceCache{};
  cache.index.insert(key, static_cast<int32_t>(cache.spans.size()), false);
  cache.spans.emplace_back(static_cast<uint32_t>(cache.ids.size()), static_cast<uint32_t>(n));
  cache.ids.insert(cache.ids.end(), ids, ids + n);
}

void BpeModel::word_from_chars(std::string_view w, std::vector<Symbol>& symbols) const {
  // HF's merge_word: the pending unknown token (id, bytes) is only written out when a known
  // character or the end comes, so byte-fallback tokens may precede it.
  int32_t unk_pending = -1;
  uint32_t unk_len = 0;
  auto add = [&](int32_t id, uint32_t len) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };
  std::string s;
  size_t i = 0;
  while (i < w.size()) {
    const size_t start = i;
    i += utf8_length(static_cast<unsigned char>(w[i]));
    const uint32_t byte_len = static_cast<uint32_t>(i - start);
    s.assign(w.substr(start, byte_len));
    if (start > 0 && config_.continuing_subword_prefix) s = *config_.continuing_subword_prefix + s;
    if (i >= w.size() && config_.end_of_word_suffix) s += *config_.end_of_word_suffix;
    const int32_t id = vocab_.find(s);
    if (id >= 0) {
      if (unk_pending >= 0) add(unk_pending, unk_len);
      unk_pending = -1;
      add(id, byte_len);
      continue;
    }
    if (config_.byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        const int32_t bid = vocab_.find(fmt::format("<0x{:02X}>", b));
        if (bid < 0) break;
        bytes.push_back(bid);
      }
      if (bytes.size() == s.size()) {
        for (int32_t bid : bytes) add(bid, 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending >= 0 && config_.fuse_unk) {
        unk_len += byte_len;
      } else {
        if (unk_pending >= 0) add(unk_pending, unk_len);
        unk_pending = unk_id_;
        unk_len = byte_len;
      }
    }
  }
  if (unk_pending >= 0) add(unk_pending, unk_len);
}

void BpeModel::merge_all(std::vector<Symbol>& symbols) const {
  const int32_t n = static_cast<int32_t>(symbols.size());
  if (n >= 2) {
    thread_local std::vector<HeapEntry> storage;
    storage.clear();
    std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<HeapEntry>> queue(
        std::greater<HeapEntry>(), std::move(storage));
    for (int32_t i = 0; i + 1 < n; ++i) {
      if (const PairMap::Merge* m = merges_.find(symbols[i].id, symbols[i + 1].id)) {
        queue.push({m->rank, i, m->id});
      }
    }
    while (!queue.empty()) {
      const HeapEntry top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (left.len == 0 || left.next == -1) continue;
      const int32_t right_pos = left.next;
      const Symbol right = symbols[right_pos];
      const PairMap::Merge* m = merges_.find(left.id, right.id);
      if (m == nullptr || m->id != top.id) continue;  // an outdated entry
      left.id = top.id;
      left.len += right.len;
      left.next = right.next;
      symbols[right_pos].len = 0;
      if (right.next >= 0 && right.next < n) symbols[right.next].prev = top.pos;
      if (left.prev >= 0) {
        if (const PairMap::Merge* p = merges_.find(symbols[left.prev].id, left.id)) {
          queue.push({p->rank, left.prev, p->id});
        }
      }
      if (left.next >= 0 && left.next < n) {
        if (const PairMap::Merge* p = merges_.find(left.id, symbols[left.next].id)) {
          queue.push({p->rank, top.pos, p->id});
        }
      }
    }
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (config_.ignore_merges) {
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (cached(piece, false, out)) return;
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  word_from_chars(piece, symbols);
  merge_all(symbols);
  const size_t first = out.size();
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
  remember(piece, false, out.data() + first, out.size() - first);
}

void BpeModel::encode_raw(std::string_view raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  bool all_bytes = !config_.continuing_subword_prefix && !config_.end_of_word_suffix;
  for (unsigned char b : raw) {
    if (!all_bytes || byte_ids_[b] < 0) {
      all_bytes = false;
      break;
    }
  }
  if (!all_bytes) {  // the general path on the mapped text
    std::string mapped;
    for (unsigned char b : raw) append_utf8(byte_level_char(b), mapped);
    encode(mapped, out);
    return;
  }
  if (raw_ignore_merges_) {
    const int32_t id = raw_vocab_.find(raw);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (cached(raw, true, out)) return;
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  const int32_t n = static_cast<int32_t>(raw.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back(
        {byte_ids_[static_cast<unsigned char>(raw[i])], i - 1, i + 1 < n ? i + 1 : -1, 1});
  }
  merge_all(symbols);
  const size_t first = out.size();
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
  remember(raw, true, out.data() + first, out.size() - first);
}

}  // namespace titan
