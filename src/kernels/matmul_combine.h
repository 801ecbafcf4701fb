// combine_rows and dot_rows of the vector kernels (matmul_formats.h has their orders): rows of a
// matrix combined with coefficient sets, and a few tokens' dot products against many rows.
#pragma once

#include "kernels/matmul_formats.h"

namespace dsinfer {
namespace {

// ---- Row combination: out[t] = sum_d coef[t, d] W[first + d] (W^T times coefficient sets) ----
// Each 128-column block of a row is widened once into registers and then accumulated into every
// set's output (which stays in L1 for the few sets decode attention has).
template <class S, WKind kind>
void combine_rows_kind(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef,
                       int64_t coef_stride, int64_t n_sets, float* out, int64_t out_stride,
                       bool accumulate) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  constexpr int kBlockVectors = static_cast<int>(kFp8Block) / W;
  const int64_t K = w.cols;
  if (!accumulate)
    for (int64_t t = 0; t < n_sets; ++t)
      for (int64_t c = 0; c < K; ++c) out[t * out_stride + c] = 0.0f;
  const int64_t row_bytes = w.row_stride();
  for (int64_t d = 0; d < n_rows; ++d) {
    const int64_t r = first + d;
    const WRow row = row_of(w, r);
    // rows a few ahead (decode reads these straight from memory, a few hundred bytes a row: too
    // short a stream for the hardware prefetcher to get going)
    if (d + 4 < n_rows)
      for (int64_t b = 0; b < row_bytes; b += 64)
        __builtin_prefetch(row.data + 4 * row_bytes + b, 0, 3);
    for (int64_t c0 = 0; c0 < K; c0 += kFp8Block) {
      const int64_t end = min64(c0 + kFp8Block, K);
      const int n_vectors = static_cast<int>((end - c0) / W);
      float s = 1.0f;
      if constexpr (Format<kind>::kBlockScaled)
        s = w.scale[(r / kFp8Block) * w.scale_cols() + c0 / kFp8Block] * kFp8Bias;
      V wv[kBlockVectors];
      for (int v = 0; v < n_vectors; ++v) wv[v] = load_w<S, kind>(row, c0 + v * W);
      for (int64_t t = 0; t < n_sets; ++t) {
        const float a = coef[t * coef_stride + d] * s;
        const V av = S::set1(a);
        float* o = out + t * out_stride + c0;
        for (int v = 0; v < n_vectors; ++v)
          S::store(o + v * W, S::fma(wv[v], av, S::load(o + v * W)));
        for (int64_t c = c0 + n_vectors * W; c < end; ++c)
          out[t * out_stride + c] = std::fma(scalar_w<kind>(row, c), a, out[t * out_stride + c]);
      }
    }
  }
}

// The same order with sets and columns register-blocked (prefill: many sets). kT sets x kC
// vectors of one 128-column block accumulate in registers over all the rows; rows are read as
// fp32 (fp8 rows were widened once to value / 256 in `widened`, exactly what load_fp8 gives),
// and each coefficient is multiplied by the row's block scale * 256 as in combine_rows_kind.
template <class S, WKind kind, int T, int C>
void combine_block(const float* rows, const uint8_t* raw, int64_t row_stride,
                   const float* const* scale_rows, int64_t c_block, int64_t n_rows,
                   const float* coef, int64_t coef_stride, int64_t c, float* out,
                   int64_t out_stride, bool accumulate) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[T][C];
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v)
      acc[t][v] = accumulate ? S::load(out + t * out_stride + c + v * W) : S::zero();
  for (int64_t d = 0; d < n_rows; ++d) {
    V wv[C];
    for (int v = 0; v < C; ++v) {
      if constexpr (kind == WKind::kBF16)
        wv[v] = load_w<S, kind>(WRow{raw + d * row_stride * 2, nullptr}, c + v * W);
      else
        wv[v] = S::load(rows + d * row_stride + c + v * W);
    }
    const float s = Format<kind>::kBlockScaled ? scale_rows[d][c_block] * kFp8Bias : 1.0f;
    for (int t = 0; t < T; ++t) {
      const float a =
          Format<kind>::kBlockScaled ? coef[t * coef_stride + d] * s : coef[t * coef_stride + d];
      const V av = S::set1(a);
      for (int v = 0; v < C; ++v) acc[t][v] = S::fma(wv[v], av, acc[t][v]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v) S::store(out + t * out_stride + c + v * W, acc[t][v]);
}

template <class S, WKind kind, int T, int C = S::kCombineVectors>
void combine_block_any(int t, int c_vectors, const float* rows, const uint8_t* raw,
                       int64_t row_stride, const float* const* scale_rows, int64_t c_block,
                       int64_t n_rows, const float* coef, int64_t coef_stride, int64_t c,
                       float* out, int64_t out_stride, bool accumulate) {
  if constexpr (T > 1) {
    if (t < T)
      return combine_block_any<S, kind, T - 1, C>(t, c_vectors, rows, raw, row_stride, scale_rows,
                                                  c_block, n_rows, coef, coef_stride, c, out,
                                                  out_stride, accumulate);
  }
  if constexpr (C > 1) {
    if (c_vectors < C)
      return combine_block_any<S, kind, T, C - 1>(t, c_vectors, rows, raw, row_stride, scale_rows,
                                                  c_block, n_rows, coef, coef_stride, c, out,
                                                  out_stride, accumulate);
  }
  combine_block<S, kind, T, C>(rows, raw, row_stride, scale_rows, c_block, n_rows, coef,
                               coef_stride, c, out, out_stride, accumulate);
}

template <class S, WKind kind>
void combine_rows_blocked(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef,
                          int64_t coef_stride, int64_t n_sets, float* out, int64_t out_stride,
                          bool accumulate) {
  constexpr int W = S::kWidth, T = S::kCombineSets, C = S::kCombineVectors;
  const int64_t K = w.cols;
  const float* rows = nullptr;
  const uint8_t* raw = nullptr;
  thread_local std::vector<float> widened;  // fp8: [n_rows, K] values / 256; int4, int8: q x scale
  thread_local std::vector<const float*> scale_rows;
  if constexpr (kind == WKind::kF32) {
    rows = reinterpret_cast<const float*>(w.data) + first * K;
  } else if constexpr (kind == WKind::kBF16) {
    raw = w.data + first * K * 2;
  } else {
    widened.resize(static_cast<size_t>(n_rows * K));
    scale_rows.resize(static_cast<size_t>(n_rows));
    for (int64_t d = 0; d < n_rows; ++d) {
      const WRow row = row_of(w, first + d);
      float* dst = widened.data() + d * K;
      int64_t k = 0;
      for (; k + W <= K; k += W) S::store(dst + k, load_w<S, kind>(row, k));
      for (; k < K; ++k) dst[k] = scalar_w<kind>(row, k);
      if constexpr (Format<kind>::kBlockScaled)
        scale_rows[d] = w.scale + ((first + d) / kFp8Block) * w.scale_cols();
    }
    rows = widened.data();
  }
  for (int64_t c0 = 0; c0 < K; c0 += kFp8Block) {
    const int64_t end = min64(c0 + kFp8Block, K);
    const int64_t c_block = c0 / kFp8Block;
    for (int64_t t0 = 0; t0 < n_sets; t0 += T) {
      const int t = static_cast<int>(min64(T, n_sets - t0));
      const float* coef_t = coef + t0 * coef_stride;
      float* out_t = out + t0 * out_stride;
      int64_t c = c0;
      for (; c + W <= end; c += C * W) {
        const int c_vectors = static_cast<int>(min64(C, (end - c) / W));
        combine_block_any<S, kind, T>(t, c_vectors, rows, raw, K, scale_rows.data(), c_block,
                                      n_rows, coef_t, coef_stride, c, out_t, out_stride,
                                      accumulate);
        if (c_vectors < C) {
          c += c_vectors * W;
          break;
        }
      }
      // columns past the last whole vector: the same chain, one column at a time
      for (; c < end; ++c)
        for (int tt = 0; tt < t; ++tt) {
          float o = accumulate ? out_t[tt * out_stride + c] : 0.0f;
          for (int64_t d = 0; d < n_rows; ++d) {
            const float wk = kind == WKind::kFp8 ? rows[d * K + c]
                             : kind == WKind::kBF16
                                 ? scalar_w<kind>(WRow{raw + d * K * 2, nullptr}, c)
                                 : rows[d * K + c];
            const float a = coef_t[tt * coef_stride + d];
            o = std::fma(
                wk, Format<kind>::kBlockScaled ? a * (scale_rows[d][c_block] * kFp8Bias) : a, o);
          }
          out_t[tt * out_stride + c] = o;
        }
    }
  }
}

template <class S>
void combine_rows_impl(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef,
                       int64_t coef_stride, int64_t n_sets, float* out, int64_t out_stride,
                       bool accumulate) {
  for_format(w.dtype, [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    if (n_sets >= S::kCombineSets)
      combine_rows_blocked<S, kind>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride,
                                    accumulate);
    else
      combine_rows_kind<S, kind>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride,
                                 accumulate);
  });
}

// dot_rows: y[t, r] = x[t] . W[r] in the canonical order, a tile of TX tokens x TR rows at a
// time: each step loads TX token vectors and TR row vectors and does TX x TR FMAs into as many
// accumulators (one per output: its lanes are the canonical p_l), then each output is reduced by
// S::reduce and its tail added in k order. For few tokens against many long rows (attention's
// scores: heads x cached keys), where the GEMM's packing and per-row passes cost more than the
// products (53-69 GFLOP/s on one Intel core at 64 heads x 576 against 64-16384 keys).
template <class S, WKind kind, int TX, int TR>
void dot_tile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t r0, float* y,
              int64_t y_stride) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const int64_t K = w.cols, KV = K - K % W;
  WRow rows[TR];
  for (int j = 0; j < TR; ++j) rows[j] = row_of(w, r0 + j);
  // (the loops unrolled so that the accumulators live in registers: GCC left them on the stack)
  V acc[TX][TR];
#pragma GCC unroll 8
  for (int i = 0; i < TX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < TR; ++j) acc[i][j] = S::zero();
  for (int64_t k = 0; k < KV; k += W) {
    V xv[TX], wv[TR];
#pragma GCC unroll 8
    for (int i = 0; i < TX; ++i) xv[i] = S::load(x + i * x_stride + k);
#pragma GCC unroll 8
    for (int j = 0; j < TR; ++j) wv[j] = load_w<S, kind>(rows[j], k);
#pragma GCC unroll 8
    for (int i = 0; i < TX; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < TR; ++j) acc[i][j] = S::fma(wv[j], xv[i], acc[i][j]);
  }
  for (int i = 0; i < TX; ++i)
    for (int j = 0; j < TR; ++j) {
      float p = S::reduce(acc[i][j]);
      for (int64_t k = KV; k < K; ++k)
        p = std::fma(scalar_w<kind>(rows[j], k), x[i * x_stride + k], p);
      y[i * y_stride + r0 + j] = p;
    }
}

// The tile of the remaining tx <= TX tokens and tr <= TR rows, chosen at compile time.
template <class S, WKind kind, int TX, int TR>
void dot_tile_any(int tx, int tr, const float* x, int64_t x_stride, const WeightMatrix& w,
                  int64_t r0, float* y, int64_t y_stride) {
  if constexpr (TX > 1) {
    if (tx < TX) return dot_tile_any<S, kind, TX - 1, TR>(tx, tr, x, x_stride, w, r0, y, y_stride);
  }
  if constexpr (TR > 1) {
    if (tr < TR) return dot_tile_any<S, kind, TX, TR - 1>(tx, tr, x, x_stride, w, r0, y, y_stride);
  }
  dot_tile<S, kind, TX, TR>(x, x_stride, w, r0, y, y_stride);
}

template <class S>
void dot_rows_impl(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w,
                   float* y, int64_t y_stride) {
  constexpr int TX = S::kDotTokens, TR = S::kDotRows;
  auto run = [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    // rows outer: a tile's rows stay in L1 while every token passes over them; the next tile's
    // rows are prefetched meanwhile (a KV cache at depth is in memory, and the first token tile
    // over fresh rows otherwise waits on every line: 69 against ~140 GFLOP/s on an Intel core)
    const int64_t row_bytes = w.row_stride();
    for (int64_t r0 = 0; r0 < w.rows; r0 += TR) {
      const int tr = static_cast<int>(min64(TR, w.rows - r0));
      for (int64_t r = r0 + TR; r < min64(r0 + 2 * TR, w.rows); ++r)
        for (int64_t b = 0; b < row_bytes; b += 64)
          __builtin_prefetch(w.data + r * row_bytes + b, 0, 3);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += TX) {
        const int tx = static_cast<int>(min64(TX, n_tokens - t0));
        dot_tile_any<S, kind, TX, TR>(tx, tr, x + t0 * x_stride, x_stride, w, r0, y + t0 * y_stride,
                                      y_stride);
      }
    }
  };
  // (dot_rows in linear.cpp admits f32 and bf16 rows only)
  if (w.dtype == DType::kF32)
    run(std::integral_constant<WKind, WKind::kF32>{});
  else if (w.dtype == DType::kBF16)
    run(std::integral_constant<WKind, WKind::kBF16>{});
}

}  // namespace
}  // namespace dsinfer
