// Weight rows to bf16 (fp8 e4m3 codes exactly), for the AVX-512 translation units that feed bf16
// products (matmul_amx.cpp, matmul_bf16dot_*_avx512.cpp; include it only there). Internal linkage,
// so each unit keeps its own copy built with its own flags.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {
namespace {

// out[0, 32) = bf16 bits of codes[0, 32), in integer operations: a code with exponent field
// e >= 1 is the bf16 pattern (code & 0x7f) << 4 plus 120 << 7 (the exponent bias 127 - 7) with
// the code's sign; the 8 codes with e = 0 (zero and the subnormals m x 2^-9) come from a table.
// Every e4m3 value is a bf16 number, so this is exact (code 0x7f, e4m3fn's NaN, gives 480, as the
// scalar table's bit pattern does not matter: checkpoints hold no NaN codes).
inline __m512i fp8x32_to_bf16_vector(const uint8_t* codes) {
  const __m512i wide =
      _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i magnitude = _mm512_and_si512(wide, _mm512_set1_epi16(0x7f));
  const __m512i normal =
      _mm512_add_epi16(_mm512_slli_epi16(magnitude, 4), _mm512_set1_epi16(120 << 7));
  // e = 0: m x 2^-9 for m = 0..7 as bf16 (0, 2^-9, 2^-8, 1.5 x 2^-8, 2^-7, 1.25, 1.5, 1.75 x 2^-7)
  const __m512i subnormals =
      _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x3c60, 0x3c40, 0x3c20, 0x3c00, 0x3bc0, 0x3b80, 0x3b00, 0);
  const __mmask32 exponent_zero = _mm512_testn_epi16_mask(wide, _mm512_set1_epi16(0x78));
  const __m512i unsigned_bits =
      _mm512_mask_permutexvar_epi16(normal, exponent_zero, magnitude, subnormals);
  // the sign: bit 15 of the sign-extended code
  return _mm512_ternarylogic_epi32(unsigned_bits, wide,
                                   _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
}
inline void fp8x32_to_bf16(const uint8_t* codes, uint16_t* out) {
  _mm512_storeu_si512(out, fp8x32_to_bf16_vector(codes));
}

// fp32 -> bf16 bits in the low half of each dword, round to nearest even (f32_to_bf16's rule,
// NaN kept quiet); integer ops, so no MXCSR or DAZ question arises.
inline __m512i round_to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

// 16 int32 values (small integers: exact in bf16) as 16 bf16 bit patterns.
inline __m256i ints_to_bf16(__m512i q) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(q)), 16));
}

inline uint16_t int_to_bf16(int q) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(q)) >> 16);
}

// W[r, c0:c1) as bf16 bits into out[0, c1 - c0) (zero past w.cols): fp8 codes exactly, bf16 as
// is, int4 and int8 as their integers q (exact; the caller applies the row's group scale to the
// partial sums), f32 rounded (only where both sides of a product are activations: linear() sends
// f32 weights to the exact kernels). c0: a multiple of 32.
inline void row_to_bf16(const WeightMatrix& w, int64_t r, int64_t c0, int64_t c1, uint16_t* out) {
  const int64_t K = w.cols, end = std::min(c1, K);
  int64_t k = c0;
  if (w.dtype == DType::kF8E4M3) {
    const uint8_t* codes = w.data + r * K;
    for (; k + 32 <= end; k += 32) {
      // the same columns a few rows down: a block's rows are K apart, a stride the hardware
      // prefetcher does not follow across 1 KB pieces
      _mm_prefetch(reinterpret_cast<const char*>(codes + 4 * K + k), _MM_HINT_T0);
      fp8x32_to_bf16(codes + k, out + (k - c0));
    }
    for (; k < end; ++k)
      out[k - c0] =
          static_cast<uint16_t>(std::bit_cast<uint32_t>(fp8_e4m3_table()[codes[k]]) >> 16);
  } else if (w.dtype == kInt4Storage) {
    // 32 columns = 16 bytes (low nibbles: the first 16 columns, high: the next 16; group_quant.h)
    const uint8_t* bytes = w.data + r * w.row_stride();
    const __m512i fifteen = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
    for (; k + 32 <= end; k += 32) {
      const __m512i b =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + k / 2)));
      const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(b, fifteen), eight);
      const __m512i hi =
          _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(b, 4), fifteen), eight);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (k - c0)), ints_to_bf16(lo));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (k - c0) + 16), ints_to_bf16(hi));
    }
    for (; k < end; ++k) {
      const uint8_t byte = bytes[(k / 32) * 16 + k % 16];
      out[k - c0] = int_to_bf16((k % 32 >= 16 ? byte >> 4 : byte & 15) - 8);
    }
  } else if (w.dtype == kInt8Storage) {
    const int8_t* q = reinterpret_cast<const int8_t*>(w.data + r * K);
    for (; k + 16 <= end; k += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (k - c0)),
                          ints_to_bf16(_mm512_cvtepi8_epi32(
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k)))));
    for (; k < end; ++k) out[k - c0] = int_to_bf16(q[k]);
  } else if (w.dtype == DType::kBF16) {
    if (end > k) std::memcpy(out, w.data + (r * K + k) * 2, static_cast<size_t>(end - k) * 2);
    k = std::max(k, end);
  } else {
    const float* v = reinterpret_cast<const float*>(w.data) + r * K;
    for (; k + 16 <= end; k += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (k - c0)),
                          _mm512_cvtepi32_epi16(round_to_bf16(_mm512_loadu_ps(v + k))));
    for (; k < end; ++k) out[k - c0] = f32_to_bf16(v[k]);
  }
  std::fill(out + (std::max(k, c0) - c0), out + (c1 - c0), uint16_t{0});
}

// What the sums of row r's bf16 products over columns [c0, c0 + 128) are multiplied by: the fp8
// block scale, the int4 / int8 row's group scale (group_quant.h: groups are the same 128
// columns), else 1.
inline float block_scale(const WeightMatrix& w, int64_t r, int64_t c0) {
  if (w.block_scaled()) return w.scale[(r / kFp8Block) * w.scale_cols() + c0 / kFp8Block];
  if (w.group_scaled())
    return _cvtsh_ss(w.group_scale[r * ceil_div(w.cols, kQuantGroup) + c0 / kQuantGroup]);
  return 1.0f;
}

}  // namespace
}  // namespace dsinfer
