// The GEMV of the vector kernels (matmul_formats.h has the canonical order it keeps): a group of
// rows against up to 4 tokens, the weights streamed once; the groups, prefetch and chunks are
// the plan's (kernel_plan.h).
#pragma once

#include "kernels/matmul_formats.h"

namespace dsinfer {
namespace {

// ---- GEMV: a group of R rows against T tokens, weights streamed once -------------------------
// y[t * y_stride + i] = sum_k W_i[k] * xs[t * xs_stride + k] for i < R, t < T.
// One GEMV call's operands: y[t * y_stride + i] = xs[t] . rows[i] over K columns, for the
// call's T tokens (xs rows xs_stride apart) and its group of rows.
struct GemvTile {
  WRows rows;
  int64_t K;
  const float* xs;
  int64_t xs_stride;
  float* y;
  int64_t y_stride;
};

// gemv_group's columns from k as fp8 codes widened through L1 (where S does so): returns the
// first column not taken. The phases below are inlined: the accumulators stay in registers.
template <class S, WKind kind, int T, int R, GemvPrefetch P>
[[gnu::always_inline]] inline int64_t gemv_fp8_through_l1(const GemvTile& tile,
                                                          typename S::V (&acc)[R][T], int64_t k) {
  if constexpr (kind == WKind::kFp8 && S::kFp8ThroughL1) {
    const WRows rows = tile.rows;
    const int64_t K = tile.K, xs_stride = tile.xs_stride;
    const float* xs = tile.xs;
    using V = typename S::V;
    constexpr int W = S::kWidth;
    // The next group of rows, prefetched at the pace this one is read (R rows x 2W codes an
    // iteration): rows shorter than a few KB end before the hardware prefetcher has caught on.
    const uint8_t* next = rows[R].data;
    // 2W codes a row at a time: widened to fp16 patterns in one wide integer step and stored,
    // then converted to fp32 straight from L1 (a memory-operand conversion needs no shuffle
    // port, which the register form would share with the widening): fewer uops per byte.
    alignas(64) uint16_t half[R][2 * W];
    for (; k + 2 * W <= K; k += 2 * W) {
      V x0[T], x1[T];
      for (int t = 0; t < T; ++t) {
        x0[t] = S::load(xs + t * xs_stride + k);
        x1[t] = S::load(xs + t * xs_stride + k + W);
      }
      for (int i = 0; i < R; ++i) S::fp8_to_half_2x(rows[i].data + k, half[i]);
      for (int i = 0; i < R; ++i) __builtin_prefetch(next + R * k + i * 2 * W, 0, 2);
      for (int i = 0; i < R; ++i) __builtin_prefetch(rows[i].data + k + 4096, 0, 3);
      for (int i = 0; i < R; ++i) {
        const V a = S::load_half(half[i]), b = S::load_half(half[i] + W);
        for (int t = 0; t < T; ++t) acc[i][t] = S::fma(b, x1[t], S::fma(a, x0[t], acc[i][t]));
      }
    }
  }
  return k;
}

// gemv_group's columns from k of int4 / int8 rows, a scale group at a time; returns the first
// column not taken.
template <class S, WKind kind, int T, int R, GemvPrefetch P>
[[gnu::always_inline]] inline int64_t gemv_group_scaled(const GemvTile& tile,
                                                        typename S::V (&acc)[R][T], int64_t k) {
  if constexpr (Format<kind>::kGroupScaled) {
    const WRows rows = tile.rows;
    const int64_t K = tile.K, xs_stride = tile.xs_stride;
    const float* xs = tile.xs;
    using V = typename S::V;
    constexpr int W = S::kWidth;
    // The next group of rows, prefetched at the pace this one is read (R rows x 2W codes an
    // iteration): rows shorter than a few KB end before the hardware prefetcher has caught on.
    const uint8_t* next = rows[R].data;
    constexpr bool kPrefetch = P != GemvPrefetch::kNone;
    // A group of 128 columns at a time, so that each row's scale is widened once per group (the
    // generic load below converts it per vector). int4 where S has a 16-entry table lookup: the
    // group's 16 values (q - 8) x scale, exact, in one register per row, indexed by the nibbles;
    // else, where S widens a whole 16-byte block at once (int4_block), a block at a time.
    const int64_t K_vec = K - K % W;
    for (; k < K_vec;) {
      const int64_t group_end = min64((k / kQuantGroup + 1) * kQuantGroup, K_vec);
      V scale[R];
      for (int i = 0; i < R; ++i) scale[i] = S::set1(S::half(rows[i].scales[k / kQuantGroup]));
      if constexpr (kind == WKind::kInt4 && S::kInt4Table) {
        V table[R];
        for (int i = 0; i < R; ++i) table[i] = S::int4_table(scale[i]);
        for (; k + 2 * W <= group_end; k += 2 * W) {  // 2W = 32 columns = one 16-byte block
          V x0[T], x1[T];
          for (int t = 0; t < T; ++t) {
            x0[t] = S::load(xs + t * xs_stride + k);
            x1[t] = S::load(xs + t * xs_stride + k + W);
          }
          // (as fp8's: the next group of rows at the pace this one is read, R lines per 128
          // columns)
          if (kPrefetch && k % kQuantGroup == 0)
            for (int i = 0; i < R; ++i)
              __builtin_prefetch(next + (k / kQuantGroup * R + i) * 64, 0, 2);
          for (int i = 0; i < R; ++i) {
            V lo, hi;
            S::int4_pair(rows[i].data + k / 2, table[i], lo, hi);
            for (int t = 0; t < T; ++t) acc[i][t] = S::fma(hi, x1[t], S::fma(lo, x0[t], acc[i][t]));
          }
        }
      }
      if constexpr (kind == WKind::kInt4 && S::kInt4Widen) {
        constexpr int kVectors = kInt4Block / W;  // a 16-byte block's 32 columns
        V minus_8_scale[R];
        for (int i = 0; i < R; ++i) minus_8_scale[i] = S::mul(S::set1(-8.0f), scale[i]);
        for (; k + kInt4Block <= group_end; k += kInt4Block) {
          if (kPrefetch && k % kQuantGroup == 0)
            for (int i = 0; i < R; ++i)
              __builtin_prefetch(next + (k / kQuantGroup * R + i) * 64, 0, 2);
          // and each row 1 KB ahead (as the generic loop's 2 KB in columns): expert w1 at 1
          // token 6-7 -> 8.4-9.1 GB/s on Zen 3, w2's 1 KB rows level
          if (k % kQuantGroup == 0)
            for (int i = 0; i < R; ++i) __builtin_prefetch(rows[i].data + k / 2 + 1024, 0, 3);
          for (int i = 0; i < R; ++i) {
            V w[kVectors];
            S::int4_block(rows[i].data + k / 2, scale[i], minus_8_scale[i], w);
            for (int t = 0; t < T; ++t)
              for (int v = 0; v < kVectors; ++v)  // columns k + v W: each lane's k in order
                acc[i][t] = S::fma(w[v], S::load(xs + t * xs_stride + k + v * W), acc[i][t]);
          }
        }
      }
      for (; k < group_end; k += W) {
        V xv[T];
        for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k);
        if (kPrefetch && k % kQuantGroup == 0)
          for (int i = 0; i < R; ++i)
            __builtin_prefetch(rows[i].data + Format<kind>::offset(k) + 2048, 0, 3);
        for (int i = 0; i < R; ++i) {
          const V wv = S::mul(Format<kind>::template load_q<S>(rows[i], k), scale[i]);
          for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
        }
      }
    }
  }
  return k;
}

// gemv_group's columns from k in whole 64-byte lines, each row's line 8 KB / R ahead prefetched
// (GemvPrefetch::kWrapped); returns the first column not taken.
template <class S, WKind kind, int T, int R, GemvPrefetch P>
[[gnu::always_inline]] inline int64_t gemv_wrapped_prefetch(const GemvTile& tile,
                                                            typename S::V (&acc)[R][T], int64_t k) {
  if constexpr (P == GemvPrefetch::kWrapped && !Format<kind>::kGroupScaled &&
                !(kind == WKind::kFp8 && S::kFp8ThroughL1)) {
    const WRows rows = tile.rows;
    const int64_t K = tile.K, xs_stride = tile.xs_stride;
    const float* xs = tile.xs;
    using V = typename S::V;
    constexpr int W = S::kWidth;
    // One prefetch per 64-byte line of each row, 8 KB / R ahead; past the row's end
    // into the same row of the next group (rows are `stride` apart, so that is R - 1 rows on).
    constexpr int64_t kLineCols = 64 / Format<kind>::offset(1);
    static_assert(kLineCols % W == 0, "a line holds whole vectors");
    const int64_t stride = rows.stride, ahead = min64(kWrappedAheadPerGroup / R, stride);
    for (; k + kLineCols <= K; k += kLineCols) {
      const int64_t at = Format<kind>::offset(k) + ahead;
      const uint8_t* line = rows.data + at + (at >= stride ? (R - 1) * stride : 0);
      for (int i = 0; i < R; ++i) __builtin_prefetch(line + i * stride, 0, 3);
      for (int64_t v = 0; v < kLineCols; v += W) {
        V xv[T];
        for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k + v);
        for (int i = 0; i < R; ++i) {
          const V wv = load_w<S, kind>(rows[i], k + v);
          for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
        }
      }
    }
  }
  return k;
}

template <class S, WKind kind, int T, int R, GemvPrefetch P>
inline void gemv_group(const GemvTile& tile) {
  const WRows rows = tile.rows;
  const int64_t K = tile.K, xs_stride = tile.xs_stride, y_stride = tile.y_stride;
  const float* xs = tile.xs;
  float* y = tile.y;
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = S::zero();
  int64_t k = gemv_fp8_through_l1<S, kind, T, R, P>(tile, acc, 0);
  k = gemv_group_scaled<S, kind, T, R, P>(tile, acc, k);
  k = gemv_wrapped_prefetch<S, kind, T, R, P>(tile, acc, k);
  for (; k + W <= K; k += W) {
    V xv[T];
    for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k);
    if constexpr (P == GemvPrefetch::kAhead && kind != WKind::kFp8 && kind != WKind::kFp8Subnormal)
      for (int i = 0; i < R; ++i)
        __builtin_prefetch(rows[i].data + Format<kind>::offset(k) + 4096, 0, 3);
    for (int i = 0; i < R; ++i) {
      const V wv = load_w<S, kind>(rows[i], k);
      for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float s = S::reduce(acc[i][t]);
      for (int64_t kk = k; kk < K; ++kk)
        s = std::fma(scalar_w<kind>(rows[i], kk), xs[t * xs_stride + kk], s);
      y[t * y_stride + i] = s;
    }
}

template <class S, WKind kind, int T, GemvPrefetch P>
inline void gemv_dispatch_rows(int group, const GemvTile& tile) {
  if constexpr (T == 1 && S::kGemvMaxRows >= 16) {
    if (group == 16) return gemv_group<S, kind, T, 16, P>(tile);
  }
  if constexpr (T <= 2) {
    if (group == 8) return gemv_group<S, kind, T, 8, P>(tile);
  }
  if constexpr (T > 2 && S::kGemvRowsManyTokens >= 6) {
    if (group == 6) return gemv_group<S, kind, T, 6, P>(tile);
    if (group == 3) return gemv_group<S, kind, T, 3, P>(tile);
  }
  if (group == 4)
    gemv_group<S, kind, T, 4, P>(tile);
  else if (group == 2)
    gemv_group<S, kind, T, 2, P>(tile);
  else
    gemv_group<S, kind, T, 1, P>(tile);
}

template <class S, WKind kind, int T>
inline void gemv_dispatch(GemvPrefetch prefetch, int group, const GemvTile& tile) {
  // (int4 and int8 rows always prefetch their own way, as do fp8 rows widened through L1: one
  // instantiation for them)
  constexpr bool kOwnPrefetch =
      Format<kind>::kGroupScaled || (kind == WKind::kFp8 && S::kFp8ThroughL1);
  if (kOwnPrefetch || prefetch == GemvPrefetch::kAhead)
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kAhead>(group, tile);
  else if (prefetch == GemvPrefetch::kWrapped)
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kWrapped>(group, tile);
  else
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kNone>(group, tile);
}

// xs[t, k] = x[t, k] * scales[k / 128] * bias for every token t: x [T, K] -> xs [T, K], packed
// (fp8 activations for one block of rows).
template <class S>
inline void scale_fp8_activations(ConstMatView x, const float* scales, float bias, float* xs) {
  const int64_t T = x.rows, K = x.cols;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < K; c += kFp8Block) {
      const float factor = scales[c / kFp8Block] * bias;
      const typename S::V s = S::set1(factor);
      const int64_t end = min64(c + kFp8Block, K);
      const float* src = x.row(t);
      int64_t k = c;
      for (; k + S::kWidth <= end; k += S::kWidth)
        S::store(xs + t * K + k, S::mul(S::load(src + k), s));
      for (; k < end; ++k) xs[t * K + k] = src[k] * factor;
    }
}

// True when activations scaled by kFp8SubnormalBias are each 2^112 times the canonical ones:
// finite, and zero or at least 2^112 x the least normal float (else the canonical x * scale * 256
// would have rounded as a subnormal). Real activations always are; the check keeps the rest exact.
inline bool fits_subnormal_form(const float* xs, int64_t n) {
  // On the bit patterns of |x|, so that the loop vectorizes (a scalar loop of float compares was
  // ~25% of a 4-token fp8 GEMV): fits unless nonzero and outside [kFp8SubnormalMin, FLT_MAX].
  constexpr uint32_t kLow = 0x38800000u, kHigh = 0x7f7fffffu;  // 2^-14 and FLT_MAX
  static_assert(kFp8SubnormalMin == 0x1p-14f, "kLow is its bit pattern");
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, xs + i, sizeof u);
    u &= 0x7fffffffu;
    bad |= static_cast<uint32_t>(u != 0) &
           static_cast<uint32_t>(u - kLow > kHigh - kLow);  // (NaN, inf: above)
  }
  return bad == 0;
}

template <class S, WKind kind>
inline void gemv_tokens(int T, GemvPrefetch prefetch, int group, const GemvTile& tile) {
  switch (T) {
    case 1:
      return gemv_dispatch<S, kind, 1>(prefetch, group, tile);
    case 2:
      return gemv_dispatch<S, kind, 2>(prefetch, group, tile);
    case 3:
      return gemv_dispatch<S, kind, 3>(prefetch, group, tile);
    default:
      return gemv_dispatch<S, kind, 4>(prefetch, group, tile);
  }
}

// Tokens in groups of up to 4, rows in groups of the plan's count or the largest power of two below
// it that fits (never straddling an fp8 scale block, since fp8 activations are pre-multiplied by
// the block's scales: xs[t, k] = x[t, k] * scale[k/128] * 256). Each row sums alone, in the
// canonical order, whatever its group. fp8 rows go through S::load_fp8_subnormal where S has it and
// the block's scaled activations fit that form, else through S::load_fp8: the same bits either way.
template <class S, WKind kind>
void gemv_rows_passes(const MatmulTask& task, int64_t r0, int64_t r1, float* xs_buf) {
  const WeightMatrix& w = *task.w;
  const int64_t K = w.cols;
  const GemvPlan& plan = task.gemv;
  for (int64_t t0 = 0; t0 < task.n_tokens; t0 += 4) {
    const int T = static_cast<int>(min64(4, task.n_tokens - t0));
    const int max_group = plan.rows_per_group[T - 1];
    const float* xs = task.x + t0 * task.x_stride;
    int64_t xs_stride = task.x_stride;
    int64_t scaled_block = -1;
    bool subnormal_form = false;
    for (int64_t r = r0; r < r1;) {
      int group = max_group;
      while (group > 1 && (r + group > r1 || (Format<kind>::kBlockScaled &&
                                              (r + group - 1) / kFp8Block != r / kFp8Block)))
        group /= 2;
      if constexpr (Format<kind>::kBlockScaled) {
        const int64_t block = r / kFp8Block;
        if (block != scaled_block) {
          const float* scales = w.scale + block * w.scale_cols();
          const ConstMatView x(task.x + t0 * task.x_stride, T, K, task.x_stride);
          subnormal_form = false;
          if constexpr (S::kFp8Subnormal) {
            if (T <= plan.fp8_subnormal_tokens) {
              scale_fp8_activations<S>(x, scales, kFp8SubnormalBias, xs_buf);
              subnormal_form = fits_subnormal_form(xs_buf, T * K);
            }
          }
          if (!subnormal_form) scale_fp8_activations<S>(x, scales, kFp8Bias, xs_buf);
          xs = xs_buf;
          xs_stride = K;
          scaled_block = block;
        }
      }
      const GemvTile tile{rows_from(w, r), K, xs, xs_stride, task.y + t0 * task.y_stride + r,
                          task.y_stride};
      if constexpr (kind == WKind::kFp8 && S::kFp8Subnormal) {
        if (subnormal_form) {
          gemv_tokens<S, WKind::kFp8Subnormal>(T, plan.prefetch, group, tile);
          r += group;
          continue;
        }
      }
      gemv_tokens<S, kind>(T, plan.prefetch, group, tile);
      r += group;
    }
  }
}

template <class S, WKind kind>
void gemv_rows(const MatmulTask& task, int64_t r0, int64_t r1, float* xs_buf) {
  // (the plan's chunks keep a chunk of rows in L2 while every pass of 4 tokens reads it)
  const int64_t chunk = task.gemv.chunk_rows > 0 ? task.gemv.chunk_rows : r1 - r0;
  for (int64_t c0 = r0; c0 < r1; c0 += chunk)
    gemv_rows_passes<S, kind>(task, c0, min64(c0 + chunk, r1), xs_buf);
}

}  // namespace
}  // namespace dsinfer
