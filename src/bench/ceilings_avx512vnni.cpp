// The AVX512-VNNI loop of the int8 dot ceiling (compiled with -mavx512vnni; call only where
// cpu_has_avx512_vnni()).
#include <immintrin.h>

#include "bench/ceilings.h"

namespace dsinfer::bench_detail {

float int8_loop_avx512vnni(int64_t iterations, float seed) {
  // VPDPBUSD of small bytes: 64 multiply-adds an instruction, sums far from overflowing int32
  const __m512i x = _mm512_set1_epi8(static_cast<char>(1 + static_cast<int>(seed) % 3));
  const __m512i y = _mm512_set1_epi8(1);
  __m512i acc[kAccumulators];
#pragma GCC unroll 12
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], x, y);
  }
#pragma GCC unroll 12
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, acc[0]);
  float sum = 0;
  for (int32_t v : lanes) sum += static_cast<float>(v);
  return sum;
}

}  // namespace dsinfer::bench_detail
