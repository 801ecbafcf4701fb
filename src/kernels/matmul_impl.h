// The vector matrix kernels, written once over a small traits type S (one per ISA) and included
// only by the per-ISA translation units (matmul_avx512.cpp, matmul_avx2.cpp). Everything here
// has internal linkage and uses no library templates, so code built for one ISA can never be
// picked by the linker for another.
//
// S provides: V (vector of S::kWidth floats), zero, load, store, set1, fma, add, mul, reduce, and
//   load_fp8(codes): kWidth e4m3 codes -> their values times 2^-8, exactly (through the fp16
//                    bit pattern: code << 7 is the fp16 of value / 256, subnormals included;
//                    the NaN codes 0x7f/0xff are not special-cased: real checkpoints never hold
//                    them, as e4m3fn quantizers saturate at 448),
//   load_bf16(bits): kWidth bf16 -> fp32 (exact),
//   kFp8Subnormal and load_fp8_subnormal(codes): where true, the GEMV may load kWidth e4m3 codes
//                    as their values times 2^-120 instead (sign and the 7 other bits moved to
//                    bits 31 and 20..26 of an fp32: integer ops only; the e = 0 codes become fp32
//                    subnormals, exactly) against activations scaled by 2^112 more (see
//                    kFp8SubnormalBias: the products, hence every sum, are the same bits).
//
// The canonical order (batch invariance, ENGINE.md): every product here, GEMV or GEMM, whatever
// the number of tokens, rows or threads, computes y[t, r] = sum_k W[r, k] x[t, k] as
//   lane l < kWidth:  p_l = fma chain from 0 over k = l, l + kWidth, ... < K - K % kWidth, in
//                     increasing k, of w(r, k) * x(t, k);
//   p = reduce(p_0 .. p_{kWidth-1}) by halving (l + l + kWidth/2, ..., 0 + 1);
//   then k in [K - K % kWidth, K) in order: p = fma(w(r, k), x(t, k), p);
// with w(r, k) the exact fp32 weight, x(t, k) the activation (fp8: w is the code's value / 256,
// exact, and x is x * (block scale * 256), one fp32 multiply). combine_rows has its own order:
// per output, one fma chain from 0 over the combined rows in increasing order, of
// w(first + d, c) * coef(t, d) (fp8: coef * (block scale * 256)); with `accumulate` the chain
// starts from the output's value instead of 0, so consecutive calls over consecutive row ranges
// (a KV cache's blocks) give the bits of one call over all the rows.
// tests/canonical_order_test.cpp holds every kernel to both, bit for bit.
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul_isa.h"

namespace dsinfer {
namespace {

constexpr float kFp8Bias = 256.0f;  // load_fp8 returns value / 256; scales absorb the 256
// load_fp8_subnormal returns value x 2^-120, so its activations are x * scale * 2^120: whenever
// x * scale * 256 is zero or a normal float and x * scale * 2^120 is finite, that is exactly
// 2^112 times the canonical activation and w * x the same product (fits_subnormal_form checks).
constexpr float kFp8SubnormalBias = 0x1p120f;
constexpr float kFp8SubnormalMin = 0x1p-14f;  // 2^112 x the least normal float
// GemvPrefetch::kWrapped: how far ahead of the loads, over all R rows of a group (8 KB: 512 B a
// row for 16 rows, the best measured on Zen 5 over rows of 1.5-7 KB; 16 rows at 2 KB lost 5-15%).
constexpr int64_t kWrappedAheadPerGroup = 8192;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// A local copy of bf16_to_f32: an out-of-line copy of a shared inline function built with this
// ISA's flags could otherwise be the one the linker keeps for the whole program.
inline float bf16_bits_to_f32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// kFp8Subnormal: fp8 rows read through S::load_fp8_subnormal (the GEMV only; for_format never
// gives it).
enum class WKind { kF32, kBF16, kFp8, kInt4, kInt8, kFp8Subnormal };

// One weight row as the kernels read it: its bytes and, for the group-scaled formats (int4,
// int8), its fp16 scales, one per kQuantGroup columns.
struct WRow {
  const uint8_t* data;
  const uint16_t* scales;
};

inline WRow row_of(const WeightMatrix& w, int64_t r) {
  const int64_t stride = w.row_stride();
  return {w.data + r * stride, w.group_scale ? w.group_scale + r * ceil_div(w.cols, kQuantGroup) : nullptr};
}

// Local copies (see bf16_bits_to_f32) of the int4 layout of kernels/group_quant.h.
inline int64_t int4_byte_of(int64_t k) { return (k / kInt4Block) * (kInt4Block / 2) + k % (kInt4Block / 2); }
inline int int4_value(const uint8_t* row, int64_t k) {
  const uint8_t byte = row[int4_byte_of(k)];
  return (k % kInt4Block >= kInt4Block / 2 ? byte >> 4 : byte & 15) - 8;
}

// The weight formats, each described once (a row's stride is WeightMatrix::row_stride): the byte
// offset of column k in a row (prefetching), whether 128 x 128 block scales apply (the activations or partial sums
// are then multiplied by scale * kFp8Bias), whether per-row group scales do (the loads then give
// q x scale, exact), the vector load of S::kWidth columns as fp32 from column k (a multiple of
// S::kWidth) and the one-element load (tails) that gives the same value. A new format is one more
// specialization here plus its DType in for_format below.
template <WKind kind>
struct Format;

template <>
struct Format<WKind::kF32> {
  static constexpr bool kBlockScaled = false, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return 4 * k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) { return S::load(reinterpret_cast<const float*>(row.data) + k); }
  static float scalar(WRow row, int64_t k) { return reinterpret_cast<const float*>(row.data)[k]; }
};

template <>
struct Format<WKind::kBF16> {
  static constexpr bool kBlockScaled = false, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return 2 * k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) { return S::load_bf16(reinterpret_cast<const uint16_t*>(row.data) + k); }
  static float scalar(WRow row, int64_t k) { return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row.data)[k]); }
};

template <>
struct Format<WKind::kFp8> {
  static constexpr bool kBlockScaled = true, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) { return S::load_fp8(row.data + k); }
  static float scalar(WRow row, int64_t k) { return fp8_e4m3_table()[row.data[k]] * (1.0f / kFp8Bias); }
};

template <>
struct Format<WKind::kFp8Subnormal> {
  static constexpr bool kBlockScaled = true, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) { return S::load_fp8_subnormal(row.data + k); }
  static float scalar(WRow row, int64_t k) { return fp8_e4m3_table()[row.data[k]] * 0x1p-120f; }  // exact
};

// int4: S::load_int4(bytes, high) gives the kWidth values q (as floats) of the low or high nibbles
// of the kWidth bytes from `bytes` (16 columns per 16 bytes' nibbles: a vector never straddles).
template <>
struct Format<WKind::kInt4> {
  static constexpr bool kBlockScaled = false, kGroupScaled = true;
  static constexpr int64_t offset(int64_t k) { return k / 2; }
  // the kWidth values q of columns [k, k + kWidth) as floats (load: times the group's scale)
  template <class S>
  static typename S::V load_q(WRow row, int64_t k) {
    return S::load_int4(row.data + int4_byte_of(k), k % kInt4Block >= kInt4Block / 2);
  }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::mul(load_q<S>(row, k), S::set1(S::half(row.scales[k / kQuantGroup])));
  }
  static float scalar(WRow row, int64_t k) {
    return static_cast<float>(int4_value(row.data, k)) * f16_to_f32(row.scales[k / kQuantGroup]);
  }
};

template <>
struct Format<WKind::kInt8> {
  static constexpr bool kBlockScaled = false, kGroupScaled = true;
  static constexpr int64_t offset(int64_t k) { return k; }
  template <class S>
  static typename S::V load_q(WRow row, int64_t k) { return S::load_int8(row.data + k); }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::mul(load_q<S>(row, k), S::set1(S::half(row.scales[k / kQuantGroup])));
  }
  static float scalar(WRow row, int64_t k) {
    return static_cast<float>(static_cast<int8_t>(row.data[k])) * f16_to_f32(row.scales[k / kQuantGroup]);
  }
};

// f(std::integral_constant<WKind, kind>{}) for the format of `dtype` (the loader admits these five).
template <class F>
inline void for_format(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(std::integral_constant<WKind, WKind::kF32>{});
    case DType::kBF16: return f(std::integral_constant<WKind, WKind::kBF16>{});
    case kInt4Storage: return f(std::integral_constant<WKind, WKind::kInt4>{});
    case kInt8Storage: return f(std::integral_constant<WKind, WKind::kInt8>{});
    default: return f(std::integral_constant<WKind, WKind::kFp8>{});
  }
}

template <class S, WKind kind>
inline typename S::V load_w(WRow row, int64_t k) {
  return Format<kind>::template load<S>(row, k);
}

// The same value as load_w gives for one element (tails shorter than a vector).
template <WKind kind>
inline float scalar_w(WRow row, int64_t k) {
  return Format<kind>::scalar(row, k);
}

// Consecutive rows of one matrix: rows[i] is row first + i.
struct WRows {
  const uint8_t* data;
  int64_t stride;
  const uint16_t* scales;
  int64_t scale_stride;
  WRow operator[](int64_t i) const { return {data + i * stride, scales ? scales + i * scale_stride : nullptr}; }
};

inline WRows rows_from(const WeightMatrix& w, int64_t first) {
  const WRow row = row_of(w, first);
  return {row.data, w.row_stride(), row.scales, ceil_div(w.cols, kQuantGroup)};
}
// ---- GEMV: a group of R rows against T tokens, weights streamed once -------------------------
// y[t * y_stride + i] = sum_k W_i[k] * xs[t * xs_stride + k] for i < R, t < T.
template <class S, WKind kind, int T, int R, GemvPrefetch P>
inline void gemv_group(WRows rows, int64_t K, const float* xs,
                       int64_t xs_stride, float* y, int64_t y_stride) {
  constexpr bool kPrefetch = P != GemvPrefetch::kNone;
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = S::zero();
  int64_t k = 0;
  // The next group of rows, prefetched at the pace this one is read (R rows x 2W codes an
  // iteration): rows shorter than a few KB end before the hardware prefetcher has caught on.
  const uint8_t* next = rows[R].data;
  if constexpr (kind == WKind::kFp8 && S::kFp8ThroughL1) {
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
  if constexpr (Format<kind>::kGroupScaled) {
    // A group of 128 columns at a time, so that each row's scale is widened once per group (the
    // generic load below converts it per vector). int4 where S has a 16-entry table lookup: the
    // group's 16 values (q - 8) x scale, exact, in one register per row, indexed by the nibbles.
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
          // (as fp8's: the next group of rows at the pace this one is read, R lines per 128 columns)
          if (kPrefetch && k % kQuantGroup == 0)
            for (int i = 0; i < R; ++i) __builtin_prefetch(next + (k / kQuantGroup * R + i) * 64, 0, 2);
          for (int i = 0; i < R; ++i) {
            V lo, hi;
            S::int4_pair(rows[i].data + k / 2, table[i], lo, hi);
            for (int t = 0; t < T; ++t) acc[i][t] = S::fma(hi, x1[t], S::fma(lo, x0[t], acc[i][t]));
          }
        }
      }
      for (; k < group_end; k += W) {
        V xv[T];
        for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k);
        if (kPrefetch && k % kQuantGroup == 0)
          for (int i = 0; i < R; ++i) __builtin_prefetch(rows[i].data + Format<kind>::offset(k) + 2048, 0, 3);
        for (int i = 0; i < R; ++i) {
          const V wv = S::mul(Format<kind>::template load_q<S>(rows[i], k), scale[i]);
          for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
        }
      }
    }
  }
  if constexpr (P == GemvPrefetch::kWrapped && !Format<kind>::kGroupScaled && !(kind == WKind::kFp8 && S::kFp8ThroughL1)) {
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
  for (; k + W <= K; k += W) {
    V xv[T];
    for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k);
    if constexpr (P == GemvPrefetch::kAhead && kind != WKind::kFp8 && kind != WKind::kFp8Subnormal)
      for (int i = 0; i < R; ++i) __builtin_prefetch(rows[i].data + Format<kind>::offset(k) + 4096, 0, 3);
    for (int i = 0; i < R; ++i) {
      const V wv = load_w<S, kind>(rows[i], k);
      for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float s = S::reduce(acc[i][t]);
      for (int64_t kk = k; kk < K; ++kk) s = std::fma(scalar_w<kind>(rows[i], kk), xs[t * xs_stride + kk], s);
      y[t * y_stride + i] = s;
    }
}

template <class S, WKind kind, int T, GemvPrefetch P>
inline void gemv_dispatch_rows(int group, WRows rows, int64_t K, const float* xs,
                               int64_t xs_stride, float* y, int64_t y_stride) {
  if constexpr (T == 1 && S::kGemvMaxRows >= 16) {
    if (group == 16) return gemv_group<S, kind, T, 16, P>(rows, K, xs, xs_stride, y, y_stride);
  }
  if constexpr (T <= 2) {
    if (group == 8) return gemv_group<S, kind, T, 8, P>(rows, K, xs, xs_stride, y, y_stride);
  }
  if constexpr (T > 2 && S::kGemvRowsManyTokens >= 6) {
    if (group == 6) return gemv_group<S, kind, T, 6, P>(rows, K, xs, xs_stride, y, y_stride);
    if (group == 3) return gemv_group<S, kind, T, 3, P>(rows, K, xs, xs_stride, y, y_stride);
  }
  if (group == 4) gemv_group<S, kind, T, 4, P>(rows, K, xs, xs_stride, y, y_stride);
  else if (group == 2) gemv_group<S, kind, T, 2, P>(rows, K, xs, xs_stride, y, y_stride);
  else gemv_group<S, kind, T, 1, P>(rows, K, xs, xs_stride, y, y_stride);
}

template <class S, WKind kind, int T>
inline void gemv_dispatch(GemvPrefetch prefetch, int group, WRows rows, int64_t K,
                          const float* xs, int64_t xs_stride, float* y, int64_t y_stride) {
  // (int4 and int8 rows always prefetch their own way, as do fp8 rows widened through L1: one
  // instantiation for them)
  constexpr bool kOwnPrefetch = Format<kind>::kGroupScaled || (kind == WKind::kFp8 && S::kFp8ThroughL1);
  if (kOwnPrefetch || prefetch == GemvPrefetch::kAhead)
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kAhead>(group, rows, K, xs, xs_stride, y, y_stride);
  else if (prefetch == GemvPrefetch::kWrapped)
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kWrapped>(group, rows, K, xs, xs_stride, y, y_stride);
  else
    gemv_dispatch_rows<S, kind, T, GemvPrefetch::kNone>(group, rows, K, xs, xs_stride, y, y_stride);
}

// xs[t * K + k] = x[t * x_stride + k] * scales[k / 128] * bias for t < T (fp8 activations for one
// block of rows).
template <class S>
inline void scale_fp8_activations(const float* x, int64_t x_stride, int T, int64_t K, const float* scales,
                                  float bias, float* xs) {
  for (int t = 0; t < T; ++t)
    for (int64_t c = 0; c < K; c += kFp8Block) {
      const float factor = scales[c / kFp8Block] * bias;
      const typename S::V s = S::set1(factor);
      const int64_t end = min64(c + kFp8Block, K);
      const float* src = x + t * x_stride;
      int64_t k = c;
      for (; k + S::kWidth <= end; k += S::kWidth) S::store(xs + t * K + k, S::mul(S::load(src + k), s));
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
    bad |= static_cast<uint32_t>(u != 0) & static_cast<uint32_t>(u - kLow > kHigh - kLow);  // (NaN, inf: above)
  }
  return bad == 0;
}

template <class S, WKind kind>
inline void gemv_tokens(int T, GemvPrefetch prefetch, int group, WRows rows, int64_t K, const float* xs,
                        int64_t xs_stride, float* y, int64_t y_stride) {
  switch (T) {
    case 1: return gemv_dispatch<S, kind, 1>(prefetch, group, rows, K, xs, xs_stride, y, y_stride);
    case 2: return gemv_dispatch<S, kind, 2>(prefetch, group, rows, K, xs, xs_stride, y, y_stride);
    case 3: return gemv_dispatch<S, kind, 3>(prefetch, group, rows, K, xs, xs_stride, y, y_stride);
    default: return gemv_dispatch<S, kind, 4>(prefetch, group, rows, K, xs, xs_stride, y, y_stride);
  }
}

// Tokens in groups of up to 4, rows in groups of the plan's count or the largest power of two below
// it that fits (never straddling an fp8 scale block, since fp8 activations are pre-multiplied by
// the block's scales: xs[t, k] = x[t, k] * scale[k/128] * 256). Each row sums alone, in the canonical
// order, whatever its group. fp8 rows go through S::load_fp8_subnormal where S has it and the
// block's scaled activations fit that form, else through S::load_fp8: the same bits either way.
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
      while (group > 1 && (r + group > r1 || (Format<kind>::kBlockScaled && (r + group - 1) / kFp8Block != r / kFp8Block)))
        group /= 2;
      if constexpr (Format<kind>::kBlockScaled) {
        const int64_t block = r / kFp8Block;
        if (block != scaled_block) {
          const float* scales = w.scale + block * w.scale_cols();
          const float* x = task.x + t0 * task.x_stride;
          subnormal_form = false;
          if constexpr (S::kFp8Subnormal) {
            if (T <= plan.fp8_subnormal_tokens) {
              scale_fp8_activations<S>(x, task.x_stride, T, K, scales, kFp8SubnormalBias, xs_buf);
              subnormal_form = fits_subnormal_form(xs_buf, T * K);
            }
          }
          if (!subnormal_form) scale_fp8_activations<S>(x, task.x_stride, T, K, scales, kFp8Bias, xs_buf);
          xs = xs_buf;
          xs_stride = K;
          scaled_block = block;
        }
      }
      const WRows rows = rows_from(w, r);
      float* y = task.y + t0 * task.y_stride + r;
      if constexpr (kind == WKind::kFp8 && S::kFp8Subnormal) {
        if (subnormal_form) {
          gemv_tokens<S, WKind::kFp8Subnormal>(T, plan.prefetch, group, rows, K, xs, xs_stride, y, task.y_stride);
          r += group;
          continue;
        }
      }
      gemv_tokens<S, kind>(T, plan.prefetch, group, rows, K, xs, xs_stride, y, task.y_stride);
      r += group;
    }
  }
}

template <class S, WKind kind>
void gemv_rows(const MatmulTask& task, int64_t r0, int64_t r1, float* xs_buf) {
  // (the plan's chunks keep a chunk of rows in L2 while every pass of 4 tokens reads it)
  const int64_t chunk = task.gemv.chunk_rows > 0 ? task.gemv.chunk_rows : r1 - r0;
  for (int64_t c0 = r0; c0 < r1; c0 += chunk) gemv_rows_passes<S, kind>(task, c0, min64(c0 + chunk, r1), xs_buf);
}

// ---- GEMM: x packed transposed in tiles of NT = kNV vectors of tokens, weights widened once
// per chunk of tokens; the canonical order kept by splitting k into kW phases -----------------
// The GEMV's lane l sums k = l, l + kW, ... of one (row, token); here tokens fill the vector
// lanes, so each (row, token) keeps kW phase sums instead, phase l summing exactly the k that
// lane l does, in the same order; at the end the phases are added by the same halving. The
// result is the GEMV's bit for bit, at the register-blocked outer product's speed.
template <class S>
struct Gemm {
  using V = typename S::V;
  static constexpr int kW = S::kWidth;
  static constexpr int kNV = S::kGemmVectors;  // vectors of tokens per tile
  static constexpr int kNT = kNV * kW;         // tokens per tile
  static constexpr int kR = S::kGemmRows;      // rows per panel (kNV * kR accumulators)
  static constexpr int64_t kKC = 256;          // columns per panel (a multiple of the fp8 block and of kW)

  static int64_t tiles(int64_t n) { return (n + kNT - 1) / kNT; }

  static int64_t packed_x_size(int64_t n, int64_t K) { return tiles(n) * K * kNT; }

  // out[(j * K + k) * NT + tt] = x[(j * NT + tt), k], zero past the last token.
  static void pack_x(const float* x, int64_t n, int64_t K, int64_t x_stride, float* out) {
    for (int64_t j = 0; j < tiles(n); ++j) {
      const int64_t tokens = min64(kNT, n - j * kNT);
      const float* src = x + j * kNT * x_stride;
      float* dst = out + j * K * kNT;
      // k outer: the writes are whole rows of the tile, the reads walk kNT token rows in step
      for (int64_t k = 0; k < K; ++k) {
        int64_t tt = 0;
        for (; tt < tokens; ++tt) dst[k * kNT + tt] = src[tt * x_stride + k];
        for (; tt < kNT; ++tt) dst[k * kNT + tt] = 0.0f;
      }
    }
  }

  // dst[0, kc) = fp32 values of W[row, kb + c] as the GEMV multiplies them (fp8: value / 256).
  template <WKind kind>
  static void convert_row(const WeightMatrix& w, int64_t row, int64_t kb, int64_t kc, float* dst) {
    const WRow src = row_of(w, row);
    for (int64_t k = 0; k < kc; k += kW) S::store(dst + k, load_w<S, kind>(src, kb + k));  // kc: a multiple of kW
  }

  // fp8: the token tile's columns [kb, kb + kc) times the block scales * 256 of one row block
  // (scale_row), as the GEMV scales its activations: dst [kc, kNT].
  static void scale_tile(const float* xp, const float* scale_row, int64_t kb, int64_t kc, float* dst) {
    for (int64_t k = 0; k < kc; ++k) {
      const V s = S::set1(scale_row[(kb + k) / kFp8Block] * kFp8Bias);
      for (int v = 0; v < kNV; ++v) S::store(dst + k * kNT + v * kW, S::mul(S::load(xp + k * kNT + v * kW), s));
    }
  }

  // One phase: c[i][NT] += sum over steps s of w[i * kKC + s * kW] * xp[s * kW * NT + tt], for
  // the first NV vectors of tokens (w and xp already offset to the phase's first column).
  template <int NV>
  static void micro(const float* w, const float* xp, int64_t steps, float* c) {
    V acc[kR][NV];
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = S::load(c + i * kNT + v * kW);
    for (int64_t s = 0; s < steps; ++s) {
      V x[NV];
      for (int v = 0; v < NV; ++v) x[v] = S::load(xp + s * kW * kNT + v * kW);
      for (int i = 0; i < kR; ++i) {
        const V b = S::set1(w[i * kKC + s * kW]);
        for (int v = 0; v < NV; ++v) acc[i][v] = S::fma(b, x[v], acc[i][v]);
      }
    }
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) S::store(c + i * kNT + v * kW, acc[i][v]);
  }

  // micro<nv> for a run-time nv in [1, kNV]
  template <int NV = kNV>
  static void micro_vectors(int nv, const float* w, const float* xp, int64_t steps, float* c) {
    if constexpr (NV > 1) {
      if (nv < NV) return micro_vectors<NV - 1>(nv, w, xp, steps, c);
    }
    micro<NV>(w, xp, steps, c);
  }

  // Blocking (BLIS's, with the tokens as its B panel): a chunk of kNCT token tiles and kMC rows,
  // their phase sums in scratch (kMC x kNCT * kNT x kW floats, L2); inside it kKC-column panels,
  // each panel's weights converted to fp32 once for the whole chunk, then every row panel passes
  // over one token tile (kKC x kNT floats) while it stays in L1.
  static constexpr int64_t kMC = 8 * kR;               // rows per chunk
  static constexpr int64_t kNCT = S::kGemmChunkTiles;  // token tiles per chunk

  static int64_t scratch_size(int64_t) { return kMC * kKC + kMC * kNCT * kNT * kW + kNT + kKC * kNT; }

  // One row panel's weights of the next column panel into L2 while the micro-kernels run:
  // short row pieces a matrix row apart are a pattern the hardware prefetcher does not follow.
  template <WKind kind>
  static void prefetch_panel(const WeightMatrix& w, int64_t rp, int64_t kb, int64_t r_end, int64_t k_end) {
    if (kb >= k_end) return;
    const int64_t bytes = Format<kind>::offset(min64(kKC, k_end - kb));
    for (int64_t r = rp; r < min64(rp + kR, r_end); ++r) {
      const uint8_t* row = row_of(w, r).data + Format<kind>::offset(kb);
      for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
  }

  template <WKind kind>
  static void rows(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
    const WeightMatrix& w = *task.w;
    const int64_t K = w.cols, n = task.n_tokens, n_tiles = tiles(n);
    const int64_t K_vec = K - K % kW;  // what the phases cover; the rest is the in-order tail
    float* wbuf = scratch;               // [kMC / kR panels, kR, kKC]
    float* cbuf = scratch + kMC * kKC;   // [kMC / kR panels, kNCT tiles, kW phases, kR, kNT]
    float* out = cbuf + kMC * kNCT * kNT * kW;  // [kNT] one row's results for a tile
    float* xs_tile = out + kNT;                 // [kKC, kNT] a scaled token tile (fp8)
    for (int64_t j0 = 0; j0 < n_tiles; j0 += kNCT) {
      const int64_t nt = min64(kNCT, n_tiles - j0);
      for (int64_t rc = r0, chunk_rows = 0; rc < r1; rc += chunk_rows) {
        chunk_rows = min64(kMC, r1 - rc);
        // fp8: a chunk's rows share one row of block scales (the activations are scaled by it)
        if constexpr (Format<kind>::kBlockScaled) chunk_rows = min64(chunk_rows, (rc / kFp8Block + 1) * kFp8Block - rc);
        const float* scale_row = Format<kind>::kBlockScaled ? w.scale + (rc / kFp8Block) * w.scale_cols() : nullptr;
        const int64_t panels = (chunk_rows + kR - 1) / kR;
        std::memset(cbuf, 0, sizeof(float) * panels * nt * kW * kR * kNT);
        for (int64_t kb = 0; kb < K_vec; kb += kKC) {
          const int64_t kc = min64(kKC, K_vec - kb);
          for (int64_t i = 0; i < panels * kR; ++i) {
            if (i < chunk_rows) convert_row<kind>(w, rc + i, kb, kc, wbuf + i * kKC);
            else std::memset(wbuf + i * kKC, 0, sizeof(float) * kc);
          }
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t tokens = min64(kNT, n - (j0 + j) * kNT);  // the last tile may be partial
            const int nv = static_cast<int>((tokens + kW - 1) / kW);
            const float* xp = task.x_packed + ((j0 + j) * K + kb) * kNT;
            if constexpr (Format<kind>::kBlockScaled) {
              scale_tile(xp, scale_row, kb, kc, xs_tile);
              xp = xs_tile;
            }
            for (int64_t p = 0; p < panels; ++p) {
              // the next column panel of this row panel, spread over the first token tile
              if (j == 0) prefetch_panel<kind>(w, rc + p * kR, kb + kKC, rc + chunk_rows, K_vec);
              for (int l = 0; l < kW; ++l)
                micro_vectors(nv, wbuf + p * kR * kKC + l, xp + l * kNT, kc / kW,
                              cbuf + ((p * nt + j) * kW + l) * kR * kNT);
            }
          }
        }
        // the phases added by halving, as S::reduce adds the GEMV's lanes; then the tail in order
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t rp = rc + p * kR, n_rows = min64(kR, rc + chunk_rows - rp);
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t t0 = (j0 + j) * kNT;
            const float* xp = task.x_packed + (j0 + j) * K * kNT;
            const float* c = cbuf + (p * nt + j) * kW * kR * kNT;
            for (int64_t i = 0; i < n_rows; ++i) {
              const WRow row = row_of(w, rp + i);
              for (int v = 0; v < kNV; ++v) {
                V phase[kW];
                for (int l = 0; l < kW; ++l) phase[l] = S::load(c + (l * kR + i) * kNT + v * kW);
                for (int half = kW / 2; half >= 1; half /= 2)
                  for (int l = 0; l < half; ++l) phase[l] = S::add(phase[l], phase[l + half]);
                V sum = phase[0];
                for (int64_t k = K_vec; k < K; ++k) {
                  V xk = S::load(xp + k * kNT + v * kW);
                  if constexpr (Format<kind>::kBlockScaled) xk = S::mul(xk, S::set1(scale_row[k / kFp8Block] * kFp8Bias));
                  sum = S::fma(S::set1(scalar_w<kind>(row, k)), xk, sum);
                }
                S::store(out + v * kW, sum);
              }
              for (int64_t tt = 0; tt < kNT && t0 + tt < n; ++tt) task.y[(t0 + tt) * task.y_stride + rp + i] = out[tt];
            }
          }
        }
      }
    }
  }
};

// ---- Row combination: out[t] = sum_d coef[t, d] W[first + d] (W^T times coefficient sets) ----
// Each 128-column block of a row is widened once into registers and then accumulated into every
// set's output (which stays in L1 for the few sets decode attention has).
template <class S, WKind kind>
void combine_rows_kind(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                       int64_t n_sets, float* out, int64_t out_stride, bool accumulate) {
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
      for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row.data + 4 * row_bytes + b, 0, 3);
    for (int64_t c0 = 0; c0 < K; c0 += kFp8Block) {
      const int64_t end = min64(c0 + kFp8Block, K);
      const int n_vectors = static_cast<int>((end - c0) / W);
      float s = 1.0f;
      if constexpr (Format<kind>::kBlockScaled) s = w.scale[(r / kFp8Block) * w.scale_cols() + c0 / kFp8Block] * kFp8Bias;
      V wv[kBlockVectors];
      for (int v = 0; v < n_vectors; ++v) wv[v] = load_w<S, kind>(row, c0 + v * W);
      for (int64_t t = 0; t < n_sets; ++t) {
        const float a = coef[t * coef_stride + d] * s;
        const V av = S::set1(a);
        float* o = out + t * out_stride + c0;
        for (int v = 0; v < n_vectors; ++v) S::store(o + v * W, S::fma(wv[v], av, S::load(o + v * W)));
        for (int64_t c = c0 + n_vectors * W; c < end; ++c) out[t * out_stride + c] = std::fma(scalar_w<kind>(row, c), a, out[t * out_stride + c]);
      }
    }
  }
}

// The same order with sets and columns register-blocked (prefill: many sets). kT sets x kC
// vectors of one 128-column block accumulate in registers over all the rows; rows are read as
// fp32 (fp8 rows were widened once to value / 256 in `widened`, exactly what load_fp8 gives),
// and each coefficient is multiplied by the row's block scale * 256 as in combine_rows_kind.
template <class S, WKind kind, int T, int C>
void combine_block(const float* rows, const uint8_t* raw, int64_t row_stride, const float* const* scale_rows,
                   int64_t c_block, int64_t n_rows, const float* coef, int64_t coef_stride, int64_t c,
                   float* out, int64_t out_stride, bool accumulate) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[T][C];
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v) acc[t][v] = accumulate ? S::load(out + t * out_stride + c + v * W) : S::zero();
  for (int64_t d = 0; d < n_rows; ++d) {
    V wv[C];
    for (int v = 0; v < C; ++v) {
      if constexpr (kind == WKind::kBF16) wv[v] = load_w<S, kind>(WRow{raw + d * row_stride * 2, nullptr}, c + v * W);
      else wv[v] = S::load(rows + d * row_stride + c + v * W);
    }
    const float s = Format<kind>::kBlockScaled ? scale_rows[d][c_block] * kFp8Bias : 1.0f;
    for (int t = 0; t < T; ++t) {
      const float a = Format<kind>::kBlockScaled ? coef[t * coef_stride + d] * s : coef[t * coef_stride + d];
      const V av = S::set1(a);
      for (int v = 0; v < C; ++v) acc[t][v] = S::fma(wv[v], av, acc[t][v]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < C; ++v) S::store(out + t * out_stride + c + v * W, acc[t][v]);
}

template <class S, WKind kind, int T, int C = S::kCombineVectors>
void combine_block_any(int t, int c_vectors, const float* rows, const uint8_t* raw, int64_t row_stride,
                       const float* const* scale_rows, int64_t c_block, int64_t n_rows, const float* coef,
                       int64_t coef_stride, int64_t c, float* out, int64_t out_stride, bool accumulate) {
  if constexpr (T > 1) {
    if (t < T)
      return combine_block_any<S, kind, T - 1, C>(t, c_vectors, rows, raw, row_stride, scale_rows, c_block, n_rows,
                                                  coef, coef_stride, c, out, out_stride, accumulate);
  }
  if constexpr (C > 1) {
    if (c_vectors < C)
      return combine_block_any<S, kind, T, C - 1>(t, c_vectors, rows, raw, row_stride, scale_rows, c_block, n_rows,
                                                  coef, coef_stride, c, out, out_stride, accumulate);
  }
  combine_block<S, kind, T, C>(rows, raw, row_stride, scale_rows, c_block, n_rows, coef, coef_stride, c, out,
                               out_stride, accumulate);
}

template <class S, WKind kind>
void combine_rows_blocked(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                          int64_t n_sets, float* out, int64_t out_stride, bool accumulate) {
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
      if constexpr (Format<kind>::kBlockScaled) scale_rows[d] = w.scale + ((first + d) / kFp8Block) * w.scale_cols();
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
        combine_block_any<S, kind, T>(t, c_vectors, rows, raw, K, scale_rows.data(), c_block, n_rows, coef_t,
                                      coef_stride, c, out_t, out_stride, accumulate);
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
                             : kind == WKind::kBF16 ? scalar_w<kind>(WRow{raw + d * K * 2, nullptr}, c)
                                                    : rows[d * K + c];
            const float a = coef_t[tt * coef_stride + d];
            o = std::fma(wk, Format<kind>::kBlockScaled ? a * (scale_rows[d][c_block] * kFp8Bias) : a, o);
          }
          out_t[tt * out_stride + c] = o;
        }
    }
  }
}

template <class S>
void combine_rows_impl(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                       int64_t n_sets, float* out, int64_t out_stride, bool accumulate) {
  for_format(w.dtype, [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    if (n_sets >= S::kCombineSets)
      combine_rows_blocked<S, kind>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, accumulate);
    else combine_rows_kind<S, kind>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, accumulate);
  });
}

// dot_rows: y[t, r] = x[t] . W[r] in the canonical order, a tile of TX tokens x TR rows at a
// time: each step loads TX token vectors and TR row vectors and does TX x TR FMAs into as many
// accumulators (one per output: its lanes are the canonical p_l), then each output is reduced by
// S::reduce and its tail added in k order. For few tokens against many long rows (attention's
// scores: heads x cached keys), where the GEMM's packing and per-row passes cost more than the
// products (53-69 GFLOP/s on one Intel core at 64 heads x 576 against 64-16384 keys).
template <class S, WKind kind, int TX, int TR>
void dot_tile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t r0, float* y, int64_t y_stride) {
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
      for (int64_t k = KV; k < K; ++k) p = std::fma(scalar_w<kind>(rows[j], k), x[i * x_stride + k], p);
      y[i * y_stride + r0 + j] = p;
    }
}

// The tile of the remaining tx <= TX tokens and tr <= TR rows, chosen at compile time.
template <class S, WKind kind, int TX, int TR>
void dot_tile_any(int tx, int tr, const float* x, int64_t x_stride, const WeightMatrix& w, int64_t r0, float* y,
                  int64_t y_stride) {
  if constexpr (TX > 1) {
    if (tx < TX) return dot_tile_any<S, kind, TX - 1, TR>(tx, tr, x, x_stride, w, r0, y, y_stride);
  }
  if constexpr (TR > 1) {
    if (tr < TR) return dot_tile_any<S, kind, TX, TR - 1>(tx, tr, x, x_stride, w, r0, y, y_stride);
  }
  dot_tile<S, kind, TX, TR>(x, x_stride, w, r0, y, y_stride);
}

template <class S>
void dot_rows_impl(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y,
                   int64_t y_stride) {
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
        for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(w.data + r * row_bytes + b, 0, 3);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += TX) {
        const int tx = static_cast<int>(min64(TX, n_tokens - t0));
        dot_tile_any<S, kind, TX, TR>(tx, tr, x + t0 * x_stride, x_stride, w, r0, y + t0 * y_stride, y_stride);
      }
    }
  };
  // (dot_rows in linear.cpp admits f32 and bf16 rows only)
  if (w.dtype == DType::kF32) run(std::integral_constant<WKind, WKind::kF32>{});
  else if (w.dtype == DType::kBF16) run(std::integral_constant<WKind, WKind::kBF16>{});
}

#include "kernels/matmul_gemm_variant.h"

template <class S>
void matmul_rows_impl(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
  for_format(task.w->dtype, [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    if (task.x_packed == nullptr) gemv_rows<S, kind>(task, r0, r1, scratch);
    else if (task.batch_variant) GemmBatchVariant<S>::template rows<kind>(task, r0, r1, scratch);
    else Gemm<S>::template rows<kind>(task, r0, r1, scratch);
  });
}

template <class S>
int64_t scratch_size_impl(const MatmulTask& task) {
  if (task.x_packed && task.batch_variant) return GemmBatchVariant<S>::scratch_size(task.n_tokens);
  if (task.x_packed) return Gemm<S>::scratch_size(task.n_tokens);
  return 4 * task.w->cols;  // scaled activations of up to 4 tokens (fp8 GEMV)
}

}  // namespace
}  // namespace dsinfer
