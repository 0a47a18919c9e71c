// The body of attention_kernels.h's kernels, a template over the vector width
// (util/simd_vectors.h), included only by attention_kernels_avx2.cpp and
// attention_kernels_avx512.cpp. Everything is in an unnamed namespace: each of those files gets its
// own copy, built for its own instruction set.
//
// Why both widths give the same bits: every score, output and gradient element is one chain of
// fused multiply-adds over the head dim or the keys, lane by lane, whatever the width; the only
// sums across lanes (a softmax row's sum, grad_out . out) go through simd::sum16 and simd::dot8,
// which reduce in one fixed order for both.
#pragma once

#include <cstdint>

#include "model/attention_kernels.h"
#include "util/simd_vectors.h"

namespace titan::attention_kernels {
namespace {

constexpr int kBlockKeys = 16;  // keys a score block holds (score rows are padded to it)

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The first n rows of m, transposed in blocks of 16 rows: block b is the (D, 16) matrix
// bt[b * 16 * D + d * 16 + c] = m[b * 16 + c][d], for rows up to width (a multiple of 16), those
// past n zero. A block's columns are contiguous, so the dot products read each block as one
// stream (rows of a plain (D, width) transpose lie a multiple of 4 KiB apart, in a few cache sets).
void transpose_rows(Rows m, int64_t n, int64_t D, int64_t width, float* bt) {
  for (int64_t b = 0; b < width; b += kBlockKeys) {
    float* block = bt + b * D;
    for (int64_t d = 0; d < D; ++d)
      for (int64_t c = 0; c < kBlockKeys; ++c)
        block[d * kBlockKeys + c] = b + c < n ? m.data[(b + c) * m.row_stride + d] : 0.0f;
  }
}

// Rows of width floats (at most 16 rows), stored key block by key block: row r's keys [j, j + 16),
// j a multiple of 16, are the 16 floats at data + j * rows + r * 16. The same key of every row is
// then at fixed offsets from one pointer, where a pointer a row took 8 of x86-64's 16 general
// registers. (Measured neither faster nor slower than row-major rows, scripts/bench_attention.sh.)
struct Tile {
  float* data;
  int64_t rows;
  float* at(int64_t r, int64_t j) const {
    return data + (j / kBlockKeys * rows + r) * kBlockKeys + j % kBlockKeys;
  }
};

template <typename V>
struct Kernels {
  using F = typename V::F;
  static constexpr int kRegs = kBlockKeys / V::kLanes;  // vectors a 16-key block takes
  // How many rows the kernels keep in registers together; none of it changes a bit (each element
  // is one chain). At most kMaxRowGroup, and divisors of 16. The aim is 8 independent FMA chains,
  // enough to hide the FMA's latency on CPUs that issue two a cycle.
  // - kRows: query rows whose scores (q k^T, dp = grad_out v^T) are computed together, over
  //   kDotBlocks 16-key blocks a step; also the keys of the key gradients' sums (dk, dv)
  //   computed together. 4 at both widths.
  // - kOutRows: rows of out = p v and of dq = dscore k computed together. At AVX-512 a 16-wide
  //   head is one vector a row, so 8 (4 rows were 4 FMA chains); at AVX2 two vectors, so 4.
  // On the development machine's AMD EPYC (scripts/bench_attention.sh, 32 heads of 512 x 16,
  // 1 thread), 4 rows of one block everywhere took 4.49 ms forward at AVX-512, 8 rows of one
  // block everywhere 4.57, and 8 rows for out with 4 rows of two blocks for the scores 3.40
  // (with the blocked transpose). The accumulators must be indexed by compile-time rows only: a
  // loop over run-time rows made the compiler keep them on the stack (weighted_rows_chunk).
  static constexpr int kRows = 4;
  static_assert(kRows <= kMaxRowGroup && kBlockKeys % kRows == 0);
  static constexpr int kOutRows = kRegs == 1 ? 2 * kRows : kRows;
  static_assert(kOutRows <= kMaxRowGroup && kOutRows % kRows == 0);

  // The group of query rows [i0, i0 + rows) a kernel call works on. i0 is a multiple of kRows,
  // so every row's keys (0..i0 + r) end in the same 16-key block: key_end, the length of the
  // group's score rows.
  struct RowGroup {
    int64_t i0, rows, key_end;
  };

  static RowGroup row_group(int64_t i0, int64_t T) {
    const int64_t rows = T - i0 < kRows ? T - i0 : kRows;
    return {i0, rows, round_up(i0 + rows, kBlockKeys)};
  }

  // 16-key blocks a dot step holds: 8 accumulators at both widths for a full group.
  static constexpr int kDotBlocks = kRows * kRegs >= 8 ? 1 : 8 / (kRows * kRegs);

  // The dot products a[r] . bt[:, j] of R rows and the NB blocks from key j0, each one FMA chain
  // over d from 0; hands each block to epilogue(r, j, vectors).
  template <int R, int NB, typename Epilogue>
  __attribute__((always_inline)) static inline void dot_step(const float* const* a, const float* bt,
                                                             int64_t D, int64_t j0,
                                                             const Epilogue& epilogue) {
    constexpr int kVectors = NB * kRegs;
    F acc[R][kVectors];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < kVectors; ++c) acc[r][c] = V::zero();
    for (int64_t d = 0; d < D; ++d) {
      F bv[kVectors];
      for (int blk = 0; blk < NB; ++blk)
        for (int c = 0; c < kRegs; ++c)
          bv[blk * kRegs + c] =
              V::load(bt + (j0 + blk * kBlockKeys) * D + d * kBlockKeys + c * V::kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const F x = V::set1(a[r][d]);
        for (int c = 0; c < kVectors; ++c) acc[r][c] = V::fmadd(x, bv[c], acc[r][c]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      for (int blk = 0; blk < NB; ++blk) epilogue(r, j0 + blk * kBlockKeys, acc[r] + blk * kRegs);
  }

  // Runs the dot products a[r] . bt[:, j] for R rows and keys [0, key_end), kDotBlocks 16-key
  // blocks a step, and hands each block to epilogue(r, j, vectors). The blocking changes no bit.
  template <int R, typename Epilogue>
  __attribute__((always_inline)) static inline void row_dots(const float* const* a, const float* bt,
                                                             int64_t D, int64_t key_end,
                                                             const Epilogue& epilogue) {
    int64_t j = 0;
    for (; j + kDotBlocks * kBlockKeys <= key_end; j += kDotBlocks * kBlockKeys)
      dot_step<R, kDotBlocks>(a, bt, D, j, epilogue);
    for (; j < key_end; j += kBlockKeys) dot_step<R, 1>(a, bt, D, j, epilogue);
  }

  // row_dots over a group of 1 to kRows rows of `a`: epilogue(r, j, vectors) with r the row's
  // index in the group.
  template <typename Epilogue>
  __attribute__((always_inline)) static inline void group_dots(const Rows& a, const RowGroup& g,
                                                               const float* bt, int64_t D,
                                                               const Epilogue& epilogue) {
    const float* rows[kRows];
    for (int64_t r = 0; r < g.rows; ++r) rows[r] = a.data + (g.i0 + r) * a.row_stride;
    if (g.rows == kRows) return row_dots<kRows>(rows, bt, D, g.key_end, epilogue);
    for (int64_t r = 0; r < g.rows; ++r)
      row_dots<1>(
          rows + r, bt, D,
          g.key_end, [&](int, int64_t j, const F* v) __attribute__((always_inline)) {
            epilogue(static_cast<int>(r), j, v);
          });
  }

  // Row r of s, in place: e[j] = exp(s[j] - max) for j < n, 0 for j in [n, padded), padded a
  // multiple of 16; returns 1 / sum of e.
  static float exp_row(Tile s, int64_t r, int64_t n, int64_t padded, float max) {
    const F vmax = V::set1(max);
    F sums[kRegs];
    for (int c = 0; c < kRegs; ++c) sums[c] = V::zero();
    for (int64_t j = 0; j < padded; j += kBlockKeys) {
      float* block = s.at(r, j);
      for (int c = 0; c < kRegs; ++c) {
        const int64_t at = j + c * V::kLanes;
        F x = V::exp(V::sub(V::load(block + c * V::kLanes), vmax));
        if (j + kBlockKeys > n) x = V::first_or(x, n - at, V::zero());
        V::store(block + c * V::kLanes, x);
        sums[c] = V::add(sums[c], x);
      }
    }
    return 1.0f / V::sum16(sums);
  }

  // out[r][d0, d0 + width) = post_scale[r] * sum over j <= i0 + r of w[r0 + r][j] * m[j][d0, ...),
  // each sum one FMA chain over j from 0, whatever R is. The chunk is W vectors, the last of them
  // holding `last` floats (a masked tail when that is fewer than a vector).
  template <int R, int W>
  static void weighted_rows_chunk(Tile w, int64_t r0, int64_t i0, const Rows& m, int64_t d0,
                                  int64_t last, const float* post_scale, float* const* out) {
    F acc[R][W];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < W; ++c) acc[r][c] = V::zero();
    F row[W];
    auto load_row = [&](int64_t j) {
      const float* p = m.data + j * m.row_stride + d0;
      for (int c = 0; c < W; ++c)
        row[c] = c + 1 < W || last == V::kLanes ? V::load(p + c * V::kLanes)
                                                : V::load_first(p + c * V::kLanes, last);
    };
    auto accumulate = [&](int r, float weight) {
      const F x = V::set1(weight);
      for (int c = 0; c < W; ++c) acc[r][c] = V::fmadd(x, row[c], acc[r][c]);
    };
    for (int64_t b = 0; b <= i0; b += kBlockKeys) {  // the keys every row of the group sees
      const float* wb = w.at(r0, b);                 // row r0 + r's key b + k: wb[r * 16 + k]
      const int64_t keys = i0 + 1 - b < kBlockKeys ? i0 + 1 - b : kBlockKeys;
      for (int64_t k = 0; k < keys; ++k) {
        load_row(b + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) accumulate(r, wb[r * kBlockKeys + k]);
      }
    }
    // Unrolled, so that every accumulator has an index known when compiling: indexed at run time,
    // they went through the stack on every key above.
#pragma GCC unroll 8
    for (int r = 1; r < R; ++r)
      for (int64_t j = i0 + 1; j <= i0 + r; ++j) {
        load_row(j);
        accumulate(r, *w.at(r0 + r, j));
      }
    for (int r = 0; r < R; ++r) {
      const F scale = V::set1(post_scale[r]);
      for (int c = 0; c < W; ++c) {
        float* p = out[r] + d0 + c * V::kLanes;
        const F x = V::mul(acc[r][c], scale);
        if (c + 1 < W || last == V::kLanes)
          V::store(p, x);
        else
          V::store_first(p, x, last);
      }
    }
  }

  template <int R>
  static void weighted_rows(Tile w, int64_t r0, int64_t i0, const Rows& m, int64_t D,
                            const float* post_scale, float* const* out) {
    int64_t d0 = 0;
    for (; d0 + 2 * V::kLanes <= D; d0 += 2 * V::kLanes)
      weighted_rows_chunk<R, 2>(w, r0, i0, m, d0, V::kLanes, post_scale, out);
    if (d0 < D) {
      const int64_t rest = D - d0;
      if (rest > V::kLanes)
        weighted_rows_chunk<R, 2>(w, r0, i0, m, d0, rest - V::kLanes, post_scale, out);
      else
        weighted_rows_chunk<R, 1>(w, r0, i0, m, d0, rest, post_scale, out);
    }
  }

  // Rows i0..i0 + rows - 1 of out = post_scale[r] * (row r0 + r of w) m, row i0 + r summing
  // keys 0..i0 + r; R rows at once when there are R, else one at a time.
  template <int R>
  static void weighted_row_block(Tile w, int64_t r0, int64_t i0, int64_t rows, const Rows& m,
                                 int64_t D, const float* post_scale, MutableRows out) {
    float* out_rows[R];
    for (int64_t r = 0; r < rows; ++r) out_rows[r] = out.data + (i0 + r) * out.row_stride;
    if (rows == R) return weighted_rows<R>(w, r0, i0, m, D, post_scale, out_rows);
    for (int64_t r = 0; r < rows; ++r)
      weighted_rows<1>(w, r0 + r, i0 + r, m, D, post_scale + r, out_rows + r);
  }

  // sums[j][d0, d0 + ...) += sum over rows r < rows of w[r][j] * m[r][d0, ...), for keys
  // j < key_end (a multiple of 16): a panel of rows' share of the product w^T m, which adds up over
  // the panels in row order. w holds the rows; sums is (width, D). W vectors, the last holding
  // `last` floats.
  template <int W>
  static void panel_column_sums_chunk(Tile w, const float* const* m, int64_t rows, int64_t key_end,
                                      int64_t d0, int64_t last, int64_t D, float* sums) {
    auto load = [&](const float* p, int c) {
      return c + 1 < W || last == V::kLanes ? V::load(p) : V::load_first(p, last);
    };
    for (int64_t j0 = 0; j0 < key_end; j0 += kRows) {
      F acc[kRows][W];
#pragma GCC unroll 8
      for (int c = 0; c < kRows; ++c)
        for (int k = 0; k < W; ++k) acc[c][k] = load(sums + (j0 + c) * D + d0 + k * V::kLanes, k);
      const float* wj = w.at(0, j0);  // row r's key j0 + c: wj[r * 16 + c]
      for (int64_t r = 0; r < rows; ++r) {
        F row[W];
        for (int k = 0; k < W; ++k) row[k] = load(m[r] + d0 + k * V::kLanes, k);
#pragma GCC unroll 8
        for (int c = 0; c < kRows; ++c) {
          const F x = V::set1(wj[r * kBlockKeys + c]);
          for (int k = 0; k < W; ++k) acc[c][k] = V::fmadd(x, row[k], acc[c][k]);
        }
      }
#pragma GCC unroll 8
      for (int c = 0; c < kRows; ++c)
        for (int k = 0; k < W; ++k) {
          float* p = sums + (j0 + c) * D + d0 + k * V::kLanes;
          if (k + 1 < W || last == V::kLanes)
            V::store(p, acc[c][k]);
          else
            V::store_first(p, acc[c][k], last);
        }
    }
  }

  static void panel_column_sums(Tile w, const Rows& m, int64_t p0, int64_t rows, int64_t key_end,
                                int64_t D, float* sums) {
    const float* m_rows[kPanelRows];
    for (int64_t r = 0; r < rows; ++r) m_rows[r] = m.data + (p0 + r) * m.row_stride;
    int64_t d0 = 0;
    for (; d0 + 2 * V::kLanes <= D; d0 += 2 * V::kLanes)
      panel_column_sums_chunk<2>(w, m_rows, rows, key_end, d0, V::kLanes, D, sums);
    if (d0 < D) {
      const int64_t rest = D - d0;
      if (rest > V::kLanes)
        panel_column_sums_chunk<2>(w, m_rows, rows, key_end, d0, rest - V::kLanes, D, sums);
      else
        panel_column_sums_chunk<1>(w, m_rows, rows, key_end, d0, rest, D, sums);
    }
  }

  // The scaled scores of a group's rows (keys up to g.key_end) into rows r0.. of s, and with
  // kMax each row's largest over its keys into row_max. (The backward, which has them saved,
  // takes kMax = false and skips that work.)
  template <bool kMax>
  static void group_scores(const RowGroup& g, Rows q, const float* kt, int64_t D, float scale,
                           Tile s, int64_t r0, float* row_max) {
    const F vscale = V::set1(scale), minus_inf = V::set1(-__builtin_inff());
    F vmax[kRows];
    for (int r = 0; r < kRows; ++r) vmax[r] = minus_inf;
    group_dots(
        q, g, kt, D, [&](int r, int64_t j, const F* acc) __attribute__((always_inline)) {
          const int64_t keys = g.i0 + r + 1 - j;  // keys of this row in this block
          float* block = s.at(r0 + r, j);
          for (int c = 0; c < kRegs; ++c) {
            F x = V::mul(acc[c], vscale);
            V::store(block + c * V::kLanes, x);
            if (!kMax) continue;
            if (keys < kBlockKeys) x = V::first_or(x, keys - c * V::kLanes, minus_inf);
            vmax[r] = V::max(vmax[r], x);
          }
        });
    if (kMax)
      for (int64_t r = 0; r < g.rows; ++r) row_max[g.i0 + r] = V::max_lane(vmax[r]);
  }

  static void fill_zero(float* data, int64_t n) {  // n a multiple of kLanes
    for (int64_t i = 0; i < n; i += V::kLanes) V::store(data + i, V::zero());
  }

  static void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D,
                           MutableRows out, float* row_max, float* inverse_sums, float* scratch) {
    const int64_t width = key_width(T);
    float* kt = scratch;                                // k transposed, by 16-key blocks
    const Tile weights{scratch + D * width, kOutRows};  // kOutRows rows of width
    transpose_rows(k, T, D, width, kt);
    for (int64_t i0 = 0; i0 < T; i0 += kOutRows) {
      const int64_t rows = T - i0 < kOutRows ? T - i0 : kOutRows;
      for (int64_t sub = 0; sub < rows; sub += kRows) {
        const RowGroup g = row_group(i0 + sub, T);
        group_scores<true>(g, q, kt, D, scale, weights, sub, row_max);
        for (int64_t r = 0; r < g.rows; ++r)
          inverse_sums[g.i0 + r] =
              exp_row(weights, sub + r, g.i0 + r + 1, g.key_end, row_max[g.i0 + r]);
      }
      weighted_row_block<kOutRows>(weights, 0, i0, rows, v, D, inverse_sums + i0, out);
    }
  }

  // One group's probabilities and scores' gradient into the panel's rows: the scores and weights
  // computed again as the forward did, then p = weight * inverse sum and
  // dscore = p * (dp - grad_out . out), with dp = grad_out . v.
  static void backward_group(const RowGroup& g, int64_t p0, Rows q, Rows out, Rows grad_out,
                             const float* kt, const float* vt, int64_t D, float scale,
                             const float* row_max, const float* inverse_sums, Tile probs,
                             Tile dscores) {
    const int64_t r0 = g.i0 - p0;  // the group's first row in the panel
    group_scores<false>(g, q, kt, D, scale, probs, r0, nullptr);
    F inverses[kRows], terms[kRows];  // 1 / sum of weights, grad_out . out
    for (int64_t r = 0; r < g.rows; ++r) {
      const int64_t i = g.i0 + r;
      exp_row(probs, r0 + r, i + 1, g.key_end, row_max[i]);
      inverses[r] = V::set1(inverse_sums[i]);
      terms[r] = V::set1(
          simd::dot8(grad_out.data + i * grad_out.row_stride, out.data + i * out.row_stride, D));
    }
    group_dots(
        grad_out, g, vt, D, [&](int r, int64_t j, const F* dp) __attribute__((always_inline)) {
          float* p_block = probs.at(r0 + r, j);
          float* dscore_block = dscores.at(r0 + r, j);
          for (int c = 0; c < kRegs; ++c) {
            const F p = V::mul(V::load(p_block + c * V::kLanes), inverses[r]);
            V::store(p_block + c * V::kLanes, p);
            V::store(dscore_block + c * V::kLanes, V::mul(p, V::sub(dp[c], terms[r])));
          }
        });
  }

  static void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* row_max,
                            const float* inverse_sums, float scale, int64_t T, int64_t D,
                            MutableRows dq, MutableRows dk, MutableRows dv, float* scratch) {
    const int64_t width = key_width(T);
    float* kt = scratch;  // k and v transposed, by 16-key blocks
    float* vt = kt + D * width;
    const Tile probs{vt + D * width, kPanelRows};                     // a panel's probabilities
    const Tile dscores{probs.data + kPanelRows * width, kPanelRows};  // their scores' gradient
    float* dk_sum = dscores.data + kPanelRows * width;  // (width, D): dk / scale, summed by panel
    float* dv_sum = dk_sum + width * D;                 // (width, D): dv, likewise
    transpose_rows(k, T, D, width, kt);
    transpose_rows(v, T, D, width, vt);
    fill_zero(dk_sum, 2 * width * D);
    // Panels start at multiples of 16, so all rows of a panel have keys (and zero padding) up to
    // the same key_end, and its probabilities and gradients are one (panel_rows, key_end) block.
    for (int64_t p0 = 0; p0 < T; p0 += kPanelRows) {
      const int64_t panel_rows = T - p0 < kPanelRows ? T - p0 : kPanelRows;
      for (int64_t i0 = p0; i0 < p0 + panel_rows; i0 += kRows)
        backward_group(row_group(i0, T), p0, q, out, grad_out, kt, vt, D, scale, row_max,
                       inverse_sums, probs, dscores);
      // The panel's dq rows, kOutRows at a time.
      float scales[kOutRows];
      for (float& x : scales) x = scale;
      for (int64_t i0 = p0; i0 < p0 + panel_rows; i0 += kOutRows) {
        const int64_t rows = p0 + panel_rows - i0 < kOutRows ? p0 + panel_rows - i0 : kOutRows;
        weighted_row_block<kOutRows>(dscores, i0 - p0, i0, rows, k, D, scales, dq);
      }
      const int64_t key_end = round_up(p0 + panel_rows, kBlockKeys);
      panel_column_sums(probs, grad_out, p0, panel_rows, key_end, D, dv_sum);
      panel_column_sums(dscores, q, p0, panel_rows, key_end, D, dk_sum);
    }
    const F vscale = V::set1(scale);
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; d += V::kLanes) {
        float* dv_row = dv.data + j * dv.row_stride + d;
        float* dk_row = dk.data + j * dk.row_stride + d;
        const float *dv_in = dv_sum + j * D + d, *dk_in = dk_sum + j * D + d;
        const int64_t n = D - d;  // a masked tail when fewer than a vector
        if (n >= V::kLanes) {
          V::store(dv_row, V::load(dv_in));
          V::store(dk_row, V::mul(V::load(dk_in), vscale));
        } else {
          V::store_first(dv_row, V::load_first(dv_in, n), n);
          V::store_first(dk_row, V::mul(V::load_first(dk_in, n), vscale), n);
        }
      }
  }
};

}  // namespace
}  // namespace titan::attention_kernels
