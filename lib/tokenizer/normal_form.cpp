#include "tokenizer/normal_form.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "util/utf8.h"

namespace titan {
namespace {

// The generated tables' rows. A rank orders non-starters as their canonical combining classes do
// (the classes themselves are not visible through the package the tables are read from).
struct CombiningRank {
  uint32_t first, last;
  uint8_t rank;
};
struct Decomposition {
  uint32_t code_point;
  uint16_t offset;  // in kDecompositionPool
  uint8_t length;
};
struct Composition {
  uint32_t first, second, composite;
};

#include "tokenizer/normal_form_tables.inc"

// Hangul syllables decompose and compose by formula (Unicode section 3.12):
// S = SBase + (L index * VCount + V index) * TCount + T index, with T index 0 for "no trailing".
constexpr uint32_t kSyllableBase = 0xAC00, kSyllableCount = 11172;
constexpr uint32_t kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr uint32_t kLeadCount = 19, kVowelCount = 21, kTrailCount = 28;

// A code point of the text being normalized, with its combining rank (0: a starter).
struct RankedCodePoint {
  uint32_t c;
  uint8_t rank;
};

uint8_t combining_rank(uint32_t c) {
  if (c < kNfcInertBelow) return 0;
  const auto* end = std::end(kCombiningRanks);
  const auto* it = std::upper_bound(std::begin(kCombiningRanks), end, c,
                                    [](uint32_t v, const CombiningRank& r) { return v < r.first; });
  return it != std::begin(kCombiningRanks) && (it - 1)->last >= c ? (it - 1)->rank : 0;
}

const Decomposition* find_decomposition(uint32_t c) {
  if (c < kNfdInertBelow) return nullptr;
  const auto* end = std::end(kDecompositions);
  const auto* it =
      std::lower_bound(std::begin(kDecompositions), end, c,
                       [](const Decomposition& d, uint32_t v) { return d.code_point < v; });
  return it != end && it->code_point == c ? it : nullptr;
}

// The primary composite of `first` and `second`; 0 when they do not compose.
uint32_t composite_of(uint32_t first, uint32_t second) {
  if (second < kNfcInertBelow) return 0;
  if (first >= kLeadBase && first < kLeadBase + kLeadCount && second >= kVowelBase &&
      second < kVowelBase + kVowelCount) {
    return kSyllableBase + ((first - kLeadBase) * kVowelCount + second - kVowelBase) * kTrailCount;
  }
  // kTrailBase itself is no trailing consonant (it stands for "none"): it does not compose.
  if (first >= kSyllableBase && first < kSyllableBase + kSyllableCount &&
      (first - kSyllableBase) % kTrailCount == 0 && second > kTrailBase &&
      second < kTrailBase + kTrailCount) {
    return first + (second - kTrailBase);
  }
  const auto* end = std::end(kCompositions);
  const auto* it =
      std::lower_bound(std::begin(kCompositions), end, Composition{first, second, 0},
                       [](const Composition& a, const Composition& b) {
                         return a.first != b.first ? a.first < b.first : a.second < b.second;
                       });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// Builds the decomposed, canonically ordered text. Runs of non-starters are sorted when they end
// (a stable sort by rank): sorting as each mark arrives would be quadratic on long runs.
class Decomposer {
 public:
  explicit Decomposer(std::vector<RankedCodePoint>& out) : out_(out) {}

  void add(uint32_t c) {
    if (c < kNfdInertBelow) {
      push(c, 0);
    } else if (c >= kSyllableBase && c < kSyllableBase + kSyllableCount) {
      const uint32_t s = c - kSyllableBase;
      push(kLeadBase + s / (kVowelCount * kTrailCount), 0);
      push(kVowelBase + s % (kVowelCount * kTrailCount) / kTrailCount, 0);
      if (s % kTrailCount != 0) push(kTrailBase + s % kTrailCount, 0);
    } else if (const Decomposition* d = find_decomposition(c)) {
      for (size_t k = 0; k < d->length; ++k) {
        const uint32_t part = kDecompositionPool[d->offset + k];
        push(part, combining_rank(part));
      }
    } else {
      push(c, combining_rank(c));
    }
  }

  void finish() { sort_run(); }

 private:
  void push(uint32_t c, uint8_t rank) {
    if (rank == 0) sort_run();
    out_.push_back({c, rank});
    if (rank == 0) run_start_ = out_.size();
  }
  void sort_run() {
    const auto by_rank = [](const RankedCodePoint& a, const RankedCodePoint& b) {
      return a.rank < b.rank;
    };
    const auto begin = out_.begin() + static_cast<std::ptrdiff_t>(run_start_);
    if (!std::is_sorted(begin, out_.end(), by_rank)) std::stable_sort(begin, out_.end(), by_rank);
    run_start_ = out_.size();
  }

  std::vector<RankedCodePoint>& out_;
  size_t run_start_ = 0;  // where the current run of non-starters begins
};

// Canonical composition in place: each code point joins the last starter when nothing between
// them blocks it (a starter, or a non-starter of equal or higher rank left uncomposed) and the
// two form a primary composite.
void compose(std::vector<RankedCodePoint>& text) {
  constexpr size_t kNone = SIZE_MAX;
  size_t kept = 0, starter = kNone;
  int last_rank = -1;  // of the last code point kept since the starter; -1: none
  for (const RankedCodePoint& cp : text) {
    if (starter != kNone && last_rank < int(cp.rank)) {
      const uint32_t composite = composite_of(text[starter].c, cp.c);
      if (composite != 0) {
        text[starter].c = composite;
        continue;
      }
    }
    if (cp.rank == 0) {
      starter = kept;
      last_rank = -1;
    } else {
      last_rank = cp.rank;
    }
    text[kept++] = cp;
  }
  text.resize(kept);
}

}  // namespace

void to_normal_form(std::string& text, NormalForm form) {
  const uint32_t inert_below = form == NormalForm::NFC ? kNfcInertBelow : kNfdInertBelow;
  // Code points below inert_below come out of the normal form as they went in (for NFC, U+00C0
  // decomposes and recomposes), and what they decompose into begins with a starter that composes
  // with nothing before it (the generator checks both). So the text before the first other code
  // point stays as it is; the one just before it is redone, as what follows may compose with it.
  size_t start = text.size(), i = 0, previous = 0;
  while (i < text.size()) {
    const size_t at = i;
    if (next_code_point(text, i) >= inert_below) {
      start = previous;
      break;
    }
    previous = at;
  }
  if (start == text.size()) return;

  std::vector<RankedCodePoint> cps;
  cps.reserve(text.size() - start);
  Decomposer decomposer(cps);
  for (i = start; i < text.size();) decomposer.add(next_code_point(text, i));
  decomposer.finish();
  if (form == NormalForm::NFC) compose(cps);

  std::string out(text, 0, start);
  out.reserve(text.size() + text.size() / 2);
  for (const RankedCodePoint& cp : cps) append_utf8(cp.c, out);
  text.swap(out);
}

size_t normal_form_max_growth() { return kNormalFormMaxGrowth; }

}  // namespace titan
