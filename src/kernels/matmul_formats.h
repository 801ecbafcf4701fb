// The vector matrix kernels, written once over a small traits type S (one per ISA) and included
// only by the per-ISA translation units (matmul_avx512.cpp, matmul_avx2.cpp). Everything here
// has internal linkage and uses no library templates, so code built for one ISA can never be
// picked by the linker for another.
//
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
// The canonical order (batch invariance, docs/ENGINE.md): every product here, GEMV or GEMM,
// whatever the number of tokens, rows or threads, computes y[t, r] = sum_k W[r, k] x[t, k] as
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
//
// This file: the weight formats (Format<kind>), how the kernels read a row, shared helpers.
#pragma once

#include <cmath>
#include <cstdint>
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
  return {w.data + r * stride,
          w.group_scale ? w.group_scale + r * ceil_div(w.cols, kQuantGroup) : nullptr};
}

// Local copies (see bf16_bits_to_f32) of the int4 layout of kernels/group_quant.h.
inline int64_t int4_byte_of(int64_t k) {
  return (k / kInt4Block) * (kInt4Block / 2) + k % (kInt4Block / 2);
}
inline int int4_value(const uint8_t* row, int64_t k) {
  const uint8_t byte = row[int4_byte_of(k)];
  return (k % kInt4Block >= kInt4Block / 2 ? byte >> 4 : byte & 15) - 8;
}

// The weight formats, each described once (a row's stride is WeightMatrix::row_stride): the byte
// offset of column k in a row (prefetching), whether 128 x 128 block scales apply (the activations
// or partial sums are then multiplied by scale * kFp8Bias), whether per-row group scales do (the
// loads then give q x scale, exact), the vector load of S::kWidth columns as fp32 from column k (a
// multiple of S::kWidth) and the one-element load (tails) that gives the same value. A new format
// is one more specialization here plus its DType in for_format below.
template <WKind kind>
struct Format;

template <>
struct Format<WKind::kF32> {
  static constexpr bool kBlockScaled = false, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return 4 * k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::load(reinterpret_cast<const float*>(row.data) + k);
  }
  static float scalar(WRow row, int64_t k) { return reinterpret_cast<const float*>(row.data)[k]; }
};

template <>
struct Format<WKind::kBF16> {
  static constexpr bool kBlockScaled = false, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return 2 * k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::load_bf16(reinterpret_cast<const uint16_t*>(row.data) + k);
  }
  static float scalar(WRow row, int64_t k) {
    return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row.data)[k]);
  }
};

template <>
struct Format<WKind::kFp8> {
  static constexpr bool kBlockScaled = true, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::load_fp8(row.data + k);
  }
  static float scalar(WRow row, int64_t k) {
    return fp8_e4m3_table()[row.data[k]] * (1.0f / kFp8Bias);
  }
};

template <>
struct Format<WKind::kFp8Subnormal> {
  static constexpr bool kBlockScaled = true, kGroupScaled = false;
  static constexpr int64_t offset(int64_t k) { return k; }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::load_fp8_subnormal(row.data + k);
  }
  static float scalar(WRow row, int64_t k) {
    return fp8_e4m3_table()[row.data[k]] * 0x1p-120f;
  }  // exact
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
  static typename S::V load_q(WRow row, int64_t k) {
    return S::load_int8(row.data + k);
  }
  template <class S>
  static typename S::V load(WRow row, int64_t k) {
    return S::mul(load_q<S>(row, k), S::set1(S::half(row.scales[k / kQuantGroup])));
  }
  static float scalar(WRow row, int64_t k) {
    return static_cast<float>(static_cast<int8_t>(row.data[k])) *
           f16_to_f32(row.scales[k / kQuantGroup]);
  }
};

// f(std::integral_constant<WKind, kind>{}) for the format of `dtype` (the loader admits these
// five).
template <class F>
inline void for_format(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(std::integral_constant<WKind, WKind::kF32>{});
    case DType::kBF16:
      return f(std::integral_constant<WKind, WKind::kBF16>{});
    case kInt4Storage:
      return f(std::integral_constant<WKind, WKind::kInt4>{});
    case kInt8Storage:
      return f(std::integral_constant<WKind, WKind::kInt8>{});
    default:
      return f(std::integral_constant<WKind, WKind::kFp8>{});
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
  WRow operator[](int64_t i) const {
    return {data + i * stride, scales ? scales + i * scale_stride : nullptr};
  }
};

inline WRows rows_from(const WeightMatrix& w, int64_t first) {
  const WRow row = row_of(w, first);
  return {row.data, w.row_stride(), row.scales, ceil_div(w.cols, kQuantGroup)};
}

}  // namespace
}  // namespace dsinfer
