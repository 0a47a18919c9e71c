// Compiled with -mavx2 -mfma on x86-64 (lib/CMakeLists.txt). Everything but the header's entry
// points has internal linkage, and only <immintrin.h> and avx2_math.h (internal linkage too) are
// included, so no AVX2 copy of a shared inline function can leak into the rest of the program.
#include "model/attention_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "model/avx2_math.h"

namespace titan::attention_kernels {
namespace {

constexpr int kLanes = 8;  // floats in a __m256

using avx2::exp_ps;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Lanes [0, valid) all ones, the rest zero.
__m256 lane_mask(int64_t valid) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int32_t n = static_cast<int32_t>(valid < kLanes ? valid : kLanes);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota));
}

float horizontal_sum(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float horizontal_max(__m256 x) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// bt (D, width) = the first n rows of m, transposed; columns [n, width) are zero.
void transpose_rows(Rows m, int64_t n, int64_t D, int64_t width, float* bt) {
  for (int64_t d = 0; d < D; ++d) {
    float* column = bt + d * width;
    for (int64_t j = 0; j < n; ++j) column[j] = m.data[j * m.row_stride + d];
    for (int64_t j = n; j < width; ++j) column[j] = 0.0f;
  }
}

float dot(const float* a, const float* b, int64_t D) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t d = 0; d < D; d += kLanes)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
  return horizontal_sum(acc);
}

// The group of query rows [i0, i0 + rows) a kernel call works on. i0 is a multiple of kRowGroup,
// so every row's keys (0..i0 + r) end in the same 16-key block: key_end, the packed rows' length.
struct RowGroup {
  int64_t i0, rows, key_end;
};

// Runs the dot products a[r] . bt[:, j] for the group's rows and keys [0, key_end), 16 keys at a
// time, each one FMA chain over d from 0, and hands each 16-key block to
// epilogue(r, j, low 8, high 8).
template <int R, typename Epilogue>
__attribute__((always_inline)) inline void row_dots(const float* const* a, const float* bt,
                                                    int64_t width, int64_t D, int64_t key_end,
                                                    const Epilogue& epilogue) {
  for (int64_t j = 0; j < key_end; j += 16) {
    __m256 acc[R][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; ++d) {
      const float* b = bt + d * width + j;
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + kLanes);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(a[r] + d);
        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) epilogue(r, j, acc[r][0], acc[r][1]);
  }
}

// row_dots over a group of 1 to kRowGroup rows of `a`: epilogue(r, j, low, high) with r the row's
// index in the group.
template <typename Epilogue>
__attribute__((always_inline)) inline void group_dots(const Rows& a, const RowGroup& g,
                                                      const float* bt, int64_t width, int64_t D,
                                                      const Epilogue& epilogue) {
  const float* rows[kRowGroup];
  for (int64_t r = 0; r < g.rows; ++r) rows[r] = a.data + (g.i0 + r) * a.row_stride;
  if (g.rows == kRowGroup) return row_dots<kRowGroup>(rows, bt, width, D, g.key_end, epilogue);
  for (int64_t r = 0; r < g.rows; ++r)
    row_dots<1>(
        rows + r, bt, width, D,
        g.key_end, [&](int, int64_t j, __m256 lo, __m256 hi) __attribute__((always_inline)) {
          epilogue(static_cast<int>(r), j, lo, hi);
        });
}

// e[j] = exp(s[j] - max) for j < n, 0 for j in [n, padded), padded a multiple of 16; returns
// 1 / sum of e.
float exp_row(const float* s, int64_t n, int64_t padded, float max, float* e) {
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
  for (int64_t j = 0; j < padded; j += 2 * kLanes) {
    __m256 x0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), vmax));
    __m256 x1 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j + kLanes), vmax));
    if (j + 2 * kLanes > n) {
      x0 = _mm256_and_ps(x0, lane_mask(n - j));
      x1 = _mm256_and_ps(x1, lane_mask(n - j - kLanes));
    }
    _mm256_storeu_ps(e + j, x0);
    _mm256_storeu_ps(e + j + kLanes, x1);
    sum0 = _mm256_add_ps(sum0, x0);
    sum1 = _mm256_add_ps(sum1, x1);
  }
  return 1.0f / horizontal_sum(_mm256_add_ps(sum0, sum1));
}

// out[r][d0, d0 + 8W) = post_scale[r] * sum over j <= i0 + r of w[r][j] * m[j][d0, d0 + 8W),
// each sum one FMA chain over j from 0, whatever R is.
template <int R, int W>
void weighted_rows_chunk(const float* const* w, int64_t i0, const Rows& m, int64_t d0,
                         const float* post_scale, float* const* out) {
  __m256 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < W; ++c) acc[r][c] = _mm256_setzero_ps();
  __m256 row[W];
  auto load_row = [&](int64_t j) {
    for (int c = 0; c < W; ++c)
      row[c] = _mm256_loadu_ps(m.data + j * m.row_stride + d0 + c * kLanes);
  };
  auto accumulate = [&](int r, int64_t j) {
    const __m256 x = _mm256_broadcast_ss(w[r] + j);
    for (int c = 0; c < W; ++c) acc[r][c] = _mm256_fmadd_ps(x, row[c], acc[r][c]);
  };
  for (int64_t j = 0; j <= i0; ++j) {  // the keys every row of the group sees
    load_row(j);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) accumulate(r, j);
  }
  for (int r = 1; r < R; ++r)
    for (int64_t j = i0 + 1; j <= i0 + r; ++j) {
      load_row(j);
      accumulate(r, j);
    }
  for (int r = 0; r < R; ++r) {
    const __m256 scale = _mm256_set1_ps(post_scale[r]);
    for (int c = 0; c < W; ++c)
      _mm256_storeu_ps(out[r] + d0 + c * kLanes, _mm256_mul_ps(acc[r][c], scale));
  }
}

template <int R>
void weighted_rows(const float* const* w, int64_t i0, const Rows& m, int64_t D,
                   const float* post_scale, float* const* out) {
  int64_t d0 = 0;
  for (; d0 + 2 * kLanes <= D; d0 += 2 * kLanes)
    weighted_rows_chunk<R, 2>(w, i0, m, d0, post_scale, out);
  if (d0 < D) weighted_rows_chunk<R, 1>(w, i0, m, d0, post_scale, out);
}

// Rows of out for the group = post_scale[r] * w[r] m, row i0 + r summing keys 0..i0 + r.
void group_weighted_rows(const float* const* w, const RowGroup& g, const Rows& m, int64_t D,
                         const float* post_scale, MutableRows out) {
  float* out_rows[kRowGroup];
  for (int64_t r = 0; r < g.rows; ++r) out_rows[r] = out.data + (g.i0 + r) * out.row_stride;
  if (g.rows == kRowGroup) return weighted_rows<kRowGroup>(w, g.i0, m, D, post_scale, out_rows);
  for (int64_t r = 0; r < g.rows; ++r)
    weighted_rows<1>(w + r, g.i0 + r, m, D, post_scale + r, out_rows + r);
}

// sums[j][d0, d0 + 8W) += sum over rows r < rows of w[r][j] * m[r][d0, d0 + 8W), for keys
// j < key_end (a multiple of 4): a panel of rows' share of the product w^T m, which adds up over
// the panels in row order. w is (rows, width); sums is (width, D).
template <int W>
void panel_column_sums_chunk(const float* w, int64_t width, const float* const* m, int64_t rows,
                             int64_t key_end, int64_t d0, int64_t D, float* sums) {
  for (int64_t j0 = 0; j0 < key_end; j0 += kRowGroup) {
    __m256 acc[kRowGroup][W];
#pragma GCC unroll 4
    for (int c = 0; c < kRowGroup; ++c)
      for (int k = 0; k < W; ++k)
        acc[c][k] = _mm256_loadu_ps(sums + (j0 + c) * D + d0 + k * kLanes);
    for (int64_t r = 0; r < rows; ++r) {
      __m256 row[W];
      for (int k = 0; k < W; ++k) row[k] = _mm256_loadu_ps(m[r] + d0 + k * kLanes);
#pragma GCC unroll 4
      for (int c = 0; c < kRowGroup; ++c) {
        const __m256 x = _mm256_broadcast_ss(w + r * width + j0 + c);
        for (int k = 0; k < W; ++k) acc[c][k] = _mm256_fmadd_ps(x, row[k], acc[c][k]);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < kRowGroup; ++c)
      for (int k = 0; k < W; ++k)
        _mm256_storeu_ps(sums + (j0 + c) * D + d0 + k * kLanes, acc[c][k]);
  }
}

void panel_column_sums(const float* w, int64_t width, const Rows& m, int64_t p0, int64_t rows,
                       int64_t key_end, int64_t D, float* sums) {
  const float* m_rows[kPanelRows];
  for (int64_t r = 0; r < rows; ++r) m_rows[r] = m.data + (p0 + r) * m.row_stride;
  int64_t d0 = 0;
  for (; d0 + 2 * kLanes <= D; d0 += 2 * kLanes)
    panel_column_sums_chunk<2>(w, width, m_rows, rows, key_end, d0, D, sums);
  if (d0 < D) panel_column_sums_chunk<1>(w, width, m_rows, rows, key_end, d0, D, sums);
}

void fill_zero(float* data, int64_t n) {  // n a multiple of 8
  for (int64_t i = 0; i < n; i += kLanes) _mm256_storeu_ps(data + i, _mm256_setzero_ps());
}

RowGroup row_group(int64_t i0, int64_t T) {
  const int64_t rows = T - i0 < kRowGroup ? T - i0 : kRowGroup;
  return {i0, rows, round_up(i0 + rows, 16)};
}

// Forward of one group: scaled scores into s (kRowGroup, width) and each row's maximum over its
// keys, then the row's exponentials into `weights` (packed) and 1 / their sum into inverse_sums,
// then the group's output rows.
void forward_group(const RowGroup& g, Rows q, Rows v, const float* kt, int64_t width, int64_t D,
                   float scale, float* s, float* weights, float* inverse_sums, MutableRows out) {
  const __m256 vscale = _mm256_set1_ps(scale), minus_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax[kRowGroup] = {minus_inf, minus_inf, minus_inf, minus_inf};
  group_dots(
      q, g, kt, width,
      D, [&](int r, int64_t j, __m256 lo, __m256 hi) __attribute__((always_inline)) {
        lo = _mm256_mul_ps(lo, vscale);
        hi = _mm256_mul_ps(hi, vscale);
        _mm256_storeu_ps(s + r * width + j, lo);
        _mm256_storeu_ps(s + r * width + j + kLanes, hi);
        const int64_t keys = g.i0 + r + 1 - j;  // keys of this row in this block
        if (keys < 16) {
          lo = _mm256_blendv_ps(minus_inf, lo, lane_mask(keys));
          hi = _mm256_blendv_ps(minus_inf, hi, lane_mask(keys - kLanes));
        }
        vmax[r] = _mm256_max_ps(vmax[r], _mm256_max_ps(lo, hi));
      });
  const float* weight_rows[kRowGroup];
  for (int64_t r = 0; r < g.rows; ++r) {
    float* row = weights + packed_row_offset(g.i0 + r);
    inverse_sums[g.i0 + r] =
        exp_row(s + r * width, g.i0 + r + 1, g.key_end, horizontal_max(vmax[r]), row);
    weight_rows[r] = row;
  }
  group_weighted_rows(weight_rows, g, v, D, inverse_sums + g.i0, out);
}

}  // namespace

void forward_head(Rows q, Rows k, Rows v, float scale, int64_t T, int64_t D, MutableRows out,
                  float* weights, float* inverse_sums, float* scratch) {
  const int64_t width = key_width(T);
  float* kt = scratch;                  // (D, width)
  float* scores = scratch + D * width;  // (kRowGroup, width)
  transpose_rows(k, T, D, width, kt);
  for (int64_t i0 = 0; i0 < T; i0 += kRowGroup)
    forward_group(row_group(i0, T), q, v, kt, width, D, scale, scores, weights, inverse_sums, out);
}

void backward_head(Rows q, Rows k, Rows v, Rows out, Rows grad_out, const float* weights,
                   const float* inverse_sums, float scale, int64_t T, int64_t D, MutableRows dq,
                   MutableRows dk, MutableRows dv, float* scratch) {
  const int64_t width = key_width(T);
  float* vt = scratch;                           // (D, width)
  float* probs = vt + D * width;                 // (kPanelRows, width): a panel's probabilities
  float* dscores = probs + kPanelRows * width;   // (kPanelRows, width): their scores' gradient
  float* dk_sum = dscores + kPanelRows * width;  // (width, D): dk / scale, summed panel by panel
  float* dv_sum = dk_sum + width * D;            // (width, D): dv, likewise
  transpose_rows(v, T, D, width, vt);
  fill_zero(dk_sum, 2 * width * D);
  const float scales[kRowGroup] = {scale, scale, scale, scale};
  // Panels start at multiples of 16, so all rows of a panel have keys (and zero padding) up to the
  // same key_end, and its probabilities and gradients are one (panel_rows, key_end) block.
  for (int64_t p0 = 0; p0 < T; p0 += kPanelRows) {
    const int64_t panel_rows = T - p0 < kPanelRows ? T - p0 : kPanelRows;
    for (int64_t i0 = p0; i0 < p0 + panel_rows; i0 += kRowGroup) {
      const RowGroup g = row_group(i0, T);
      const float* weight_rows[kRowGroup];
      float *prob_rows[kRowGroup], *dscore_rows[kRowGroup];
      __m256 inverses[kRowGroup], terms[kRowGroup];  // 1 / sum of weights, grad_out . out
      for (int64_t r = 0; r < g.rows; ++r) {
        weight_rows[r] = weights + packed_row_offset(i0 + r);
        prob_rows[r] = probs + (i0 - p0 + r) * width;
        dscore_rows[r] = dscores + (i0 - p0 + r) * width;
        inverses[r] = _mm256_set1_ps(inverse_sums[i0 + r]);
        terms[r] = _mm256_set1_ps(dot(grad_out.data + (i0 + r) * grad_out.row_stride,
                                      out.data + (i0 + r) * out.row_stride, D));
      }
      // p = weight / sum; dscore = p * (dp - grad_out . out), with dp = grad_out . v.
      group_dots(
          grad_out, g, vt, width,
          D, [&](int r, int64_t j, __m256 lo, __m256 hi) __attribute__((always_inline)) {
            const __m256 p_lo = _mm256_mul_ps(_mm256_loadu_ps(weight_rows[r] + j), inverses[r]);
            const __m256 p_hi =
                _mm256_mul_ps(_mm256_loadu_ps(weight_rows[r] + j + kLanes), inverses[r]);
            _mm256_storeu_ps(prob_rows[r] + j, p_lo);
            _mm256_storeu_ps(prob_rows[r] + j + kLanes, p_hi);
            _mm256_storeu_ps(dscore_rows[r] + j, _mm256_mul_ps(p_lo, _mm256_sub_ps(lo, terms[r])));
            _mm256_storeu_ps(dscore_rows[r] + j + kLanes,
                             _mm256_mul_ps(p_hi, _mm256_sub_ps(hi, terms[r])));
          });
      group_weighted_rows(dscore_rows, g, k, D, scales, dq);
    }
    const int64_t key_end = round_up(p0 + panel_rows, 16);
    panel_column_sums(probs, width, grad_out, p0, panel_rows, key_end, D, dv_sum);
    panel_column_sums(dscores, width, q, p0, panel_rows, key_end, D, dk_sum);
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < T; ++j)
    for (int64_t d = 0; d < D; d += kLanes) {
      _mm256_storeu_ps(dv.data + j * dv.row_stride + d, _mm256_loadu_ps(dv_sum + j * D + d));
      _mm256_storeu_ps(dk.data + j * dk.row_stride + d,
                       _mm256_mul_ps(_mm256_loadu_ps(dk_sum + j * D + d), vscale));
    }
}

}  // namespace titan::attention_kernels

#else  // not built for AVX2 (not x86-64): cpu_has_avx2_fma() is false, so these are never called

#include <cstdlib>

namespace titan::attention_kernels {

void forward_head(Rows, Rows, Rows, float, int64_t, int64_t, MutableRows, float*, float*, float*) {
  std::abort();
}

void backward_head(Rows, Rows, Rows, Rows, Rows, const float*, const float*, float, int64_t,
                   int64_t, MutableRows, MutableRows, MutableRows, float*) {
  std::abort();
}

}  // namespace titan::attention_kernels
#endif
