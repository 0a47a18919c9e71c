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

constexpr int kBlockKeys = 16;  // keys a score block holds (the packed rows' padding)

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

template <typename V>
struct Kernels {
  using F = typename V::F;
  static constexpr int kRegs = kBlockKeys / V::kLanes;  // vectors a 16-key block takes
  // How many rows the kernels keep in registers together; none of it changes a bit (each element
  // is one chain). At most kMaxRowGroup, and divisors of 16. The aim is 8 independent FMA chains,
  // enough to hide the FMA's latency on CPUs that issue two a cycle.
  // - kRows: query rows whose scores (q k^T, dp = grad_out v^T) are computed together, over
  //   kDotBlocks 16-key blocks a step; also the rows of dq = dscore k, and the keys of the key
  //   gradients' sums (dk, dv), computed together. 4 at both widths.
  // - kOutRows: rows of out = p v computed together. At AVX-512 a 16-wide head is one vector a
  //   row, so 8 (4 rows were 4 FMA chains); at AVX2 two vectors, so 4.
  // On the development machine's AMD EPYC (scripts/bench_attention.sh, 32 heads of 512 x 16,
  // 1 thread), 4 rows of one block everywhere took 4.49 ms forward at AVX-512, 8 rows of one
  // block everywhere 4.57, and this 3.40 (with the blocked transpose and streamed weights). dq at
  // 8 rows made the backward slower: perf showed its accumulators stored to the stack every key.
  static constexpr int kRows = 4;
  static_assert(kRows <= kMaxRowGroup && kBlockKeys % kRows == 0);
  static constexpr int kOutRows = kRegs == 1 ? 2 * kRows : kRows;
  static_assert(kOutRows <= kMaxRowGroup && kOutRows % kRows == 0);

  // The group of query rows [i0, i0 + rows) a kernel call works on. i0 is a multiple of kRows,
  // so every row's keys (0..i0 + r) end in the same 16-key block: key_end, the packed rows'
  // length.
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
                                                             int64_t width, int64_t D, int64_t j0,
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
                                                             int64_t width, int64_t D,
                                                             int64_t key_end,
                                                             const Epilogue& epilogue) {
    int64_t j = 0;
    for (; j + kDotBlocks * kBlockKeys <= key_end; j += kDotBlocks * kBlockKeys)
      dot_step<R, kDotBlocks>(a, bt, width, D, j, epilogue);
    for (; j < key_end; j += kBlockKeys) dot_step<R, 1>(a, bt, width, D, j, epilogue);
  }

  // row_dots over a group of 1 to kRows rows of `a`: epilogue(r, j, vectors) with r the row's
  // index in the group.
  template <typename Epilogue>
  __attribute__((always_inline)) static inline void group_dots(const Rows& a, const RowGroup& g,
                                                               const float* bt, int64_t width,
                                                               int64_t D,
                                                               const Epilogue& epilogue) {
    const float* rows[kRows];
    for (int64_t r = 0; r < g.rows; ++r) rows[r] = a.data + (g.i0 + r) * a.row_stride;
    if (g.rows == kRows) return row_dots<kRows>(rows, bt, width, D, g.key_end, epilogue);
    for (int64_t r = 0; r < g.rows; ++r)
      row_dots<1>(
          rows + r, bt, width, D,
          g.key_end, [&](int, int64_t j, const F* v) __attribute__((always_inline)) {
            epilogue(static_cast<int>(r), j, v);
          });
  }

  // e[j] = exp(s[j] - max) for j < n, 0 for j in [n, padded), padded a multiple of 16; returns
  // 1 / sum of e.
  static float exp_row(const float* s, int64_t n, int64_t padded, float max, float* e) {
    const F vmax = V::set1(max);
    F sums[kRegs];
    for (int c = 0; c < kRegs; ++c) sums[c] = V::zero();
    for (int64_t j = 0; j < padded; j += kBlockKeys) {
      for (int c = 0; c < kRegs; ++c) {
        const int64_t at = j + c * V::kLanes;
        F x = V::exp(V::sub(V::load(s + at), vmax));
        if (j + kBlockKeys > n) x = V::first_or(x, n - at, V::zero());
        V::store(e + at, x);
        sums[c] = V::add(sums[c], x);
      }
    }
    return 1.0f / V::sum16(sums);
  }

  // out[r][d0, d0 + width) = post_scale[r] * sum over j <= i0 + r of w[r][j] * m[j][d0, ...),
  // each sum one FMA chain over j from 0, whatever R is. The chunk is W vectors, the last of them
  // holding `last` floats (a masked tail when that is fewer than a vector).
  template <int R, int W>
  static void weighted_rows_chunk(const float* const* w, int64_t i0, const Rows& m, int64_t d0,
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
    auto accumulate = [&](int r, int64_t j) {
      const F x = V::set1(w[r][j]);
      for (int c = 0; c < W; ++c) acc[r][c] = V::fmadd(x, row[c], acc[r][c]);
    };
    for (int64_t j = 0; j <= i0; ++j) {  // the keys every row of the group sees
      load_row(j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) accumulate(r, j);
    }
    for (int r = 1; r < R; ++r)
      for (int64_t j = i0 + 1; j <= i0 + r; ++j) {
        load_row(j);
        accumulate(r, j);
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
  static void weighted_rows(const float* const* w, int64_t i0, const Rows& m, int64_t D,
                            const float* post_scale, float* const* out) {
    int64_t d0 = 0;
    for (; d0 + 2 * V::kLanes <= D; d0 += 2 * V::kLanes)
      weighted_rows_chunk<R, 2>(w, i0, m, d0, V::kLanes, post_scale, out);
    if (d0 < D) {
      const int64_t rest = D - d0;
      if (rest > V::kLanes)
        weighted_rows_chunk<R, 2>(w, i0, m, d0, rest - V::kLanes, post_scale, out);
      else
        weighted_rows_chunk<R, 1>(w, i0, m, d0, rest, post_scale, out);
    }
  }

  // Rows i0..i0 + rows - 1 of out = post_scale[r] * w[r] m, row i0 + r summing keys 0..i0 + r;
  // R rows at once when there are R (i0 a multiple of R), else one at a time.
  template <int R>
  static void weighted_row_block(const float* const* w, int64_t i0, int64_t rows, const Rows& m,
                                 int64_t D, const float* post_scale, MutableRows out) {
    float* out_rows[R];
    for (int64_t r = 0; r < rows; ++r) out_rows[r] = out.data + (i0 + r) * out.row_stride;
    if (rows == R) return weighted_rows<R>(w, i0, m, D, post_scale, out_rows);
    for (int64_t r = 0; r < rows; ++r)
      weighted_rows<1>(w + r, i0 + r, m, D, post_scale + r, out_rows + r);
  }

  // sums[j][d0, d0 + ...) += sum over rows r < rows of w[r][j] * m[r][d0, ...), for keys
  // j < key_end (a multiple of 16): a panel of rows' share of the product w^T m, which adds up over
  // the panels in row order. w is (rows, width); sums is (width, D). W vectors, the last holding
  // `last` floats.
  template <int W>
  static void panel_column_sums_chunk(const float* w, int64_t width, const float* const* m,
                                      int64_t rows, int64_t key_end, int64_t d0, int64_t last,
                                      int64_t D, float* sums) {
    auto load = [&](const float* p, int c) {
      return c + 1 < W || last == V::kLanes ? V::load(p) : V::load_first(p, last);
    };
    for (int64_t j0 = 0; j0 < key_end; j0 += kRows) {
      F acc[kRows][W];
#pragma GCC unroll 8
      for (int c = 0; c < kRows; ++c)
        for (int k = 0; k < W; ++k) acc[c][k] = load(sums + (j0 + c) * D + d0 + k * V::kLanes, k);
      for (int64_t r = 0; r < rows; ++r) {
        F row[W];
        for (int k = 0; k < W; ++k) row[k] = load(m[r] + d0 + k * V::kLanes, k);
#pragma GCC unroll 8
        for (int c = 0; c < kRows; ++c) {
          const F x = V::set1(w[r * width + j0 + c]);
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

  static void panel_column_sums(const float* w, int64_t width, const Rows& m, int64_t p0,
                                int64_t rows, int64_t key_end, int64_t D, float* sums) {
    const float* m_rows[kPanelRows];
    for (int64_t r = 0; r < rows; ++r) m_rows[r] = m.data + (p0 + r) * m.row_stride;
    int64_t d0 = 0;
    for (; d0 + 2 * V::kLanes <= D; d0 += 2 * V::kLanes)
      panel_column_sums_chunk<2>(w, width, m_rows, rows, key_end, d0, V::kLanes, D, sums);
    if (d0 < D) {
      const int64_t rest = D - d0;
      if (rest > V::kLanes)
        panel_column_sums_chunk<2>(w, width, m_rows, rows, key_end, d0, rest - V::kLanes, D, sums);
      else
        panel_column_sums_chunk<1>(w, width, m_rows, rows, key_end, d0, rest, D, sums);
    }
  }

  // Scores and weights of one group: scaled scores into s (kRows, width) and each row's maximum
  // over its keys, then the row's exponentials in place of its scores, 1 / their sum into
  // inverse_sums, and the exponentials streamed to `weights` (packed). The product with v reads
  // them from s, in the cache; the backward reads `weights` much later, and a store through the
  // cache would first read each line of that block from memory. weight_rows[r] = row r of s.
  static void group_weights(const RowGroup& g, Rows q, const float* kt, int64_t width, int64_t D,
                            float scale, float* s, float* weights, float* inverse_sums,
                            const float** weight_rows) {
    const F vscale = V::set1(scale), minus_inf = V::set1(-__builtin_inff());
    F vmax[kRows];
    for (int r = 0; r < kRows; ++r) vmax[r] = minus_inf;
    group_dots(
        q, g, kt, width, D, [&](int r, int64_t j, const F* acc) __attribute__((always_inline)) {
          const int64_t keys = g.i0 + r + 1 - j;  // keys of this row in this block
          for (int c = 0; c < kRegs; ++c) {
            F x = V::mul(acc[c], vscale);
            V::store(s + r * width + j + c * V::kLanes, x);
            if (keys < kBlockKeys) x = V::first_or(x, keys - c * V::kLanes, minus_inf);
            vmax[r] = V::max(vmax[r], x);
          }
        });
    for (int64_t r = 0; r < g.rows; ++r) {
      float* row = s + r * width;
      inverse_sums[g.i0 + r] = exp_row(row, g.i0 + r + 1, g.key_end, V::max_lane(vmax[r]), row);
      stream_row(row, g.key_end, weights + packed_row_offset(g.i0 + r));
      weight_rows[r] = row;
    }
  }

  // to[0, n) = from[0, n), n a multiple of 16, `to` aligned to 64 bytes (else plain stores).
  static void stream_row(const float* from, int64_t n, float* to) {
    if (reinterpret_cast<uintptr_t>(to) % 64 != 0) {
      for (int64_t j = 0; j < n; j += V::kLanes) V::store(to + j, V::load(from + j));
      return;
    }
    for (int64_t j = 0; j < n; j += V::kLanes) V::stream(to + j, V::load(from + j));
  }

  static void fill_zero(float* data, int64_t n) {  // n a multiple of kLanes
    for (int64_t i = 0; i < n; i += V::kLanes) V::store(data + i, V::zero());
  }

  static void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D,
                           MutableRows out, float* weights, float* inverse_sums, float* scratch) {
    const int64_t width = key_width(T);
    float* kt = scratch;                  // (D, width)
    float* scores = scratch + D * width;  // (kOutRows, width)
    transpose_rows(k, T, D, width, kt);
    for (int64_t i0 = 0; i0 < T; i0 += kOutRows) {
      const int64_t rows = T - i0 < kOutRows ? T - i0 : kOutRows;
      const float* weight_rows[kOutRows];
      for (int64_t sub = 0; sub < rows; sub += kRows)
        group_weights(row_group(i0 + sub, T), q, kt, width, D, scale, scores + sub * width, weights,
                      inverse_sums, weight_rows + sub);
      weighted_row_block<kOutRows>(weight_rows, i0, rows, v, D, inverse_sums + i0, out);
    }
    simd::stream_fence();
  }

  // One group's probabilities and scores' gradient into the panel's rows:
  // p = weight / sum; dscore = p * (dp - grad_out . out), with dp = grad_out . v.
  static void backward_group(const RowGroup& g, int64_t p0, Rows out, Rows grad_out,
                             const float* vt, int64_t width, int64_t D, const float* weights,
                             const float* inverse_sums, float* probs, float* dscores) {
    const float* weight_rows[kRows];
    float *prob_rows[kRows], *dscore_rows[kRows];
    F inverses[kRows], terms[kRows];  // 1 / sum of weights, grad_out . out
    for (int64_t r = 0; r < g.rows; ++r) {
      const int64_t i = g.i0 + r;
      weight_rows[r] = weights + packed_row_offset(i);
      prob_rows[r] = probs + (i - p0) * width;
      dscore_rows[r] = dscores + (i - p0) * width;
      inverses[r] = V::set1(inverse_sums[i]);
      terms[r] = V::set1(
          simd::dot8(grad_out.data + i * grad_out.row_stride, out.data + i * out.row_stride, D));
    }
    group_dots(
        grad_out, g, vt, width,
        D, [&](int r, int64_t j, const F* dp) __attribute__((always_inline)) {
          for (int c = 0; c < kRegs; ++c) {
            const int64_t at = j + c * V::kLanes;
            const F p = V::mul(V::load(weight_rows[r] + at), inverses[r]);
            V::store(prob_rows[r] + at, p);
            V::store(dscore_rows[r] + at, V::mul(p, V::sub(dp[c], terms[r])));
          }
        });
  }

  static void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* weights,
                            const float* inverse_sums, float scale, int64_t T, int64_t D,
                            MutableRows dq, MutableRows dk, MutableRows dv, float* scratch) {
    const int64_t width = key_width(T);
    float* vt = scratch;                           // (D, width)
    float* probs = vt + D * width;                 // (kPanelRows, width): a panel's probabilities
    float* dscores = probs + kPanelRows * width;   // (kPanelRows, width): their scores' gradient
    float* dk_sum = dscores + kPanelRows * width;  // (width, D): dk / scale, summed by panel
    float* dv_sum = dk_sum + width * D;            // (width, D): dv, likewise
    transpose_rows(v, T, D, width, vt);
    fill_zero(dk_sum, 2 * width * D);
    // Panels start at multiples of 16, so all rows of a panel have keys (and zero padding) up to
    // the same key_end, and its probabilities and gradients are one (panel_rows, key_end) block.
    for (int64_t p0 = 0; p0 < T; p0 += kPanelRows) {
      const int64_t panel_rows = T - p0 < kPanelRows ? T - p0 : kPanelRows;
      for (int64_t i0 = p0; i0 < p0 + panel_rows; i0 += kRows)
        backward_group(row_group(i0, T), p0, out, grad_out, vt, width, D, weights, inverse_sums,
                       probs, dscores);
      // The panel's dq rows, kRows at a time: at kOutRows, the accumulators went through the
      // stack and the backward was slower.
      float scales[kRows];
      for (float& x : scales) x = scale;
      for (int64_t i0 = p0; i0 < p0 + panel_rows; i0 += kRows) {
        const int64_t rows = p0 + panel_rows - i0 < kRows ? p0 + panel_rows - i0 : kRows;
        const float* dscore_rows[kRows];
        for (int64_t r = 0; r < rows; ++r) dscore_rows[r] = dscores + (i0 + r - p0) * width;
        weighted_row_block<kRows>(dscore_rows, i0, rows, k, D, scales, dq);
      }
      const int64_t key_end = round_up(p0 + panel_rows, kBlockKeys);
      panel_column_sums(probs, width, grad_out, p0, panel_rows, key_end, D, dv_sum);
      panel_column_sums(dscores, width, q, p0, panel_rows, key_end, D, dk_sum);
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
