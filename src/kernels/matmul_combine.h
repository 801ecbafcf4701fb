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
void combine_rows_kind(const CombineTask& task) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  constexpr int kBlockVectors = static_cast<int>(kFp8Block) / W;
  const WeightMatrix& w = task.w;
  const MatView out = task.out;
  const int64_t K = w.cols, n_rows = task.rows.count, n_sets = out.rows;
  if (!task.accumulate)
    for (int64_t t = 0; t < n_sets; ++t)
      for (int64_t c = 0; c < K; ++c) out.row(t)[c] = 0.0f;
  const int64_t row_bytes = w.row_stride();
  for (int64_t d = 0; d < n_rows; ++d) {
    const int64_t r = task.rows.first + d;
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
        const float a = task.coef.row(t)[d] * s;
        const V av = S::set1(a);
        float* o = out.row(t) + c0;
        for (int v = 0; v < n_vectors; ++v)
          S::store(o + v * W, S::fma(wv[v], av, S::load(o + v * W)));
        for (int64_t c = c0 + n_vectors * W; c < end; ++c)
          out.row(t)[c] = std::fma(scalar_w<kind>(row, c), a, out.row(t)[c]);
      }
    }
  }
}

// A panel of combine_rows_blocked: the rows' kC vectors of columns as fp32, `stride` floats
// apart, and (block-scaled formats) each row's scales, from which column block `c_block`'s.
struct CombinePanel {
  const float* data;
  int64_t stride;
  int64_t n_rows;
  const float* const* scale_rows;
  int64_t c_block;
};

// The same order with sets and columns register-blocked (many sets: prefill, and decode's heads).
// kT sets x kC vectors of columns accumulate in registers over all the rows, read from a panel:
// the rows' kC vectors of columns as fp32, contiguous (bf16 widened, fp8 as value / 256: exactly
// what the loads give), built once and passed over by every set tile while it sits in L1. Each
// coefficient is multiplied by the row's block scale * 256 as in combine_rows_kind.
// coef [T, n_rows] -> out [T, C vectors].
template <class S, WKind kind, int T, int C>
void combine_block(const CombinePanel& panel, ConstMatView coef, MatView out, bool accumulate) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[T][C];
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v) acc[t][v] = accumulate ? S::load(out.row(t) + v * W) : S::zero();
  for (int64_t d = 0; d < panel.n_rows; ++d) {
    V wv[C];
    for (int v = 0; v < C; ++v) wv[v] = S::load(panel.data + d * panel.stride + v * W);
    const float s =
        Format<kind>::kBlockScaled ? panel.scale_rows[d][panel.c_block] * kFp8Bias : 1.0f;
    for (int t = 0; t < T; ++t) {
      const float a = Format<kind>::kBlockScaled ? coef.row(t)[d] * s : coef.row(t)[d];
      const V av = S::set1(a);
      for (int v = 0; v < C; ++v) acc[t][v] = S::fma(wv[v], av, acc[t][v]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v) S::store(out.row(t) + v * W, acc[t][v]);
}

// The block of coef.rows <= T sets and c_vectors <= C vectors, chosen at compile time.
template <class S, WKind kind, int T, int C = S::kCombineVectors>
void combine_block_any(int c_vectors, const CombinePanel& panel, ConstMatView coef, MatView out,
                       bool accumulate) {
  if constexpr (T > 1) {
    if (coef.rows < T)
      return combine_block_any<S, kind, T - 1, C>(c_vectors, panel, coef, out, accumulate);
  }
  if constexpr (C > 1) {
    if (c_vectors < C)
      return combine_block_any<S, kind, T, C - 1>(c_vectors, panel, coef, out, accumulate);
  }
  combine_block<S, kind, T, C>(panel, coef, out, accumulate);
}

template <class S, WKind kind>
void combine_rows_blocked(const CombineTask& task) {
  constexpr int W = S::kWidth, T = S::kCombineSets, C = S::kCombineVectors;
  const WeightMatrix& w = task.w;
  const MatView out = task.out;
  const ConstMatView coef = task.coef;
  const int64_t K = w.cols, first = task.rows.first, n_rows = task.rows.count, n_sets = out.rows;
  thread_local std::vector<float> panel;  // [n_rows, C * W]
  thread_local std::vector<const float*> scale_rows;
  panel.resize(static_cast<size_t>(n_rows * C * W));
  if constexpr (Format<kind>::kBlockScaled) {
    scale_rows.resize(static_cast<size_t>(n_rows));
    for (int64_t d = 0; d < n_rows; ++d)
      scale_rows[d] = w.scale + ((first + d) / kFp8Block) * w.scale_cols();
  }
  const WRows rows = rows_from(w, first);
  // a block-scaled format's columns go 128 at a time (one scale each); the others' in one span
  const int64_t span = Format<kind>::kBlockScaled ? kFp8Block : K;
  for (int64_t c0 = 0; c0 < K; c0 += span) {
    const int64_t end = min64(c0 + span, K);
    const CombinePanel block{panel.data(), C * W, n_rows, scale_rows.data(), c0 / kFp8Block};
    int64_t c = c0;
    for (; c + W <= end; c += C * W) {
      const int c_vectors = static_cast<int>(min64(C, (end - c) / W));
      // (the next panel's lines are requested meanwhile: at depth the cache is in memory, and
      // these short strided runs are too short for the hardware prefetcher)
      const int64_t next = Format<kind>::offset(c + C * W),
                    next_end = Format<kind>::offset(c + 2 * C * W);
      for (int64_t d = 0; d < n_rows; ++d) {
        for (int v = 0; v < c_vectors; ++v)
          S::store(panel.data() + d * C * W + v * W, load_w<S, kind>(rows[d], c + v * W));
        if (c + C * W < end)
          for (int64_t b = next; b < next_end + 64; b += 64)
            __builtin_prefetch(rows[d].data + b, 0, 3);
      }
      for (int64_t t0 = 0; t0 < n_sets; t0 += T) {
        const int64_t t = min64(T, n_sets - t0);
        combine_block_any<S, kind, T>(c_vectors, block, coef.rows_from(t0, t),
                                      out.rows_from(t0, t).columns(c, c_vectors * W),
                                      task.accumulate);
      }
      if (c_vectors < C) {
        c += c_vectors * W;
        break;
      }
    }
    // columns past the last whole vector: the same chain, one column at a time
    for (; c < end; ++c)
      for (int64_t t = 0; t < n_sets; ++t) {
        float o = task.accumulate ? out.row(t)[c] : 0.0f;
        for (int64_t d = 0; d < n_rows; ++d) {
          const float a = coef.row(t)[d];
          o = std::fma(
              scalar_w<kind>(rows[d], c),
              Format<kind>::kBlockScaled ? a * (scale_rows[d][block.c_block] * kFp8Bias) : a, o);
        }
        out.row(t)[c] = o;
      }
  }
}

template <class S>
void combine_rows_impl(const CombineTask& task) {
  for_format(task.w.dtype, [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    if (task.out.rows >= S::kCombineSets)
      combine_rows_blocked<S, kind>(task);
    else
      combine_rows_kind<S, kind>(task);
  });
}

// dot_rows: y[t, r] = x[t] . W[r] in the canonical order, a tile of TX tokens x TR rows at a
// time: each step loads TX token vectors and then each of the TR row vectors in turn, doing its TX
// FMAs into as many accumulators (one per output: its lanes are the canonical p_l), then each
// output is reduced by S::reduce and its tail added in k order. For few tokens against many long
// rows (attention's scores: heads x cached keys), where the GEMM's packing and per-row passes cost
// more than the products. Rows outer: a tile's TR rows stay in L1 while the tokens stream past
// (from L2 at 64 heads x 576), so the tile is wide in rows: L2 bytes per FMA fall as 1 / TR.
// x [TX, K], rows [TR, K] (dot_rows_impl's panel) -> y [TX, TR].
template <class S, int TX, int TR>
void dot_tile(ConstMatView x, ConstMatView rows, MatView y) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  const int64_t K = x.cols, KV = K - K % W;
  // (the loops unrolled so that the accumulators live in registers: GCC left them on the stack)
  V acc[TX][TR];
#pragma GCC unroll 8
  for (int i = 0; i < TX; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < TR; ++j) acc[i][j] = S::zero();
  for (int64_t k = 0; k < KV; k += W) {
    V xv[TX];
#pragma GCC unroll 8
    for (int i = 0; i < TX; ++i) xv[i] = S::load(x.row(i) + k);
#pragma GCC unroll 8
    for (int j = 0; j < TR; ++j) {
      V wv = S::load(rows.row(j) + k);
      // one load for the TX products (GCC otherwise folds it into each FMA: TX loads, and the
      // load ports, not the FMAs, bound the tile)
      asm("" : "+v"(wv));
#pragma GCC unroll 8
      for (int i = 0; i < TX; ++i) acc[i][j] = S::fma(wv, xv[i], acc[i][j]);
    }
  }
  for (int i = 0; i < TX; ++i)
    for (int j = 0; j < TR; ++j) {
      float p = S::reduce(acc[i][j]);
      for (int64_t k = KV; k < K; ++k) p = std::fma(rows.row(j)[k], x.row(i)[k], p);
      y.row(i)[j] = p;
    }
}

// The tile of the remaining x.rows <= TX tokens and rows.rows <= TR rows, chosen at compile time.
template <class S, int TX, int TR>
void dot_tile_any(ConstMatView x, ConstMatView rows, MatView y) {
  if constexpr (TX > 1) {
    if (x.rows < TX) return dot_tile_any<S, TX - 1, TR>(x, rows, y);
  }
  if constexpr (TR > 1) {
    if (rows.rows < TR) return dot_tile_any<S, TX, TR - 1>(x, rows, y);
  }
  dot_tile<S, TX, TR>(x, rows, y);
}

template <class S>
void dot_rows_impl(ConstMatView x, const WeightMatrix& w, MatView y) {
  constexpr int TX = S::kDotTokens, TR = S::kDotRows;
  const int64_t K = w.cols, row_bytes = w.row_stride();
  // each tile's rows go into a contiguous fp32 panel (bf16 widened, exactly) once for all the
  // tokens that pass over them: f32 rows too, which ran ~1.3x faster from the panel than in place
  // (a cache block's rows are 2.3 KB apart; Zen 3, 64 heads x 576)
  thread_local std::vector<float> widened;                        // [TR, K]
  if (w.dtype != DType::kF32 && w.dtype != DType::kBF16) return;  // (linear.cpp admits no other)
  widened.resize(static_cast<size_t>(TR * K));
  for (int64_t r0 = 0; r0 < w.rows; r0 += TR) {
    const int tr = static_cast<int>(min64(TR, w.rows - r0));
    // the next tile's rows prefetched meanwhile (a KV cache at depth is in memory, and the first
    // token tile over fresh rows otherwise waits on every line)
    for (int64_t r = r0 + TR; r < min64(r0 + 2 * TR, w.rows); ++r)
      for (int64_t b = 0; b < row_bytes; b += 64)
        __builtin_prefetch(w.data + r * row_bytes + b, 0, 3);
    const WRows source = rows_from(w, r0);
    for (int j = 0; j < tr; ++j) {
      float* dst = widened.data() + j * K;
      if (w.dtype == DType::kF32) {
        std::memcpy(dst, source[j].data, static_cast<size_t>(K) * sizeof(float));
        continue;
      }
      int64_t k = 0;
      for (; k + S::kWidth <= K; k += S::kWidth)
        S::store(dst + k, load_w<S, WKind::kBF16>(source[j], k));
      for (; k < K; ++k) dst[k] = scalar_w<WKind::kBF16>(source[j], k);
    }
    const ConstMatView panel(widened.data(), tr, K);  // [tr, K]
    for (int64_t t0 = 0; t0 < x.rows; t0 += TX) {
      const int64_t tx = min64(TX, x.rows - t0);
      dot_tile_any<S, TX, TR>(x.rows_from(t0, tx), panel, y.rows_from(t0, tx).columns(r0, tr));
    }
  }
}

}  // namespace
}  // namespace dsinfer
