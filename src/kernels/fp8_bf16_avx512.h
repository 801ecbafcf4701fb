// fp8 e4m3 codes to bf16, exactly, for the AVX-512 translation units that feed bf16 products
// (matmul_amx.cpp, matmul_bf16dot_avx512.cpp; include it only there). Internal linkage, so each
// unit keeps its own copy built with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace dsinfer {
namespace {

// out[0, 32) = bf16 bits of codes[0, 32): code << 7 (sign moved to bit 15, the copy at bit 14
// cleared) is the fp16 bit pattern of value / 256, subnormals included; widened to fp32 and
// times 256 (both exact), the upper half of the fp32 bits is the bf16 number (every e4m3 value
// has at most 4 significant bits).
inline void fp8x32_to_bf16(const uint8_t* codes, uint16_t* out) {
  const __m512i wide = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i half = _mm512_and_si512(_mm512_slli_epi16(wide, 7), _mm512_set1_epi16(static_cast<short>(0xBF80)));
  const __m512 bias = _mm512_set1_ps(256.0f);
  const __m512 lo = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), bias);
  const __m512 hi = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1)), bias);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(lo), 16)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16),
                      _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(hi), 16)));
}

}  // namespace
}  // namespace dsinfer
