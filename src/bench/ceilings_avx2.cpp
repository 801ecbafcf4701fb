// AVX2 + FMA loops of the ceiling measurements (compiled with -mavx2 -mfma; call only after
// cpu_supports(Isa::kAvx2)).
#include <immintrin.h>

#include "bench/ceilings.h"

namespace dsinfer::bench_detail {

uint64_t read_sum_avx2(const uint8_t* p, int64_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < bytes; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

float fma_loop_avx2(int64_t iterations, float seed) {
  // acc = acc * m + c converges to c / (1 - m): no overflow, no denormals, however long it runs
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(seed * 1e-3f);
  __m256 acc[kAccumulators];
#pragma GCC unroll 12
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm256_set1_ps(seed + static_cast<float>(j));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
  }
#pragma GCC unroll 12
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

}  // namespace dsinfer::bench_detail

namespace dsinfer::bench_detail {

float int8_loop_avx2(int64_t iterations, float seed) {
  // int8 mode's AVX2 sequence without its sign step: VPMADDUBSW (32 byte products summed in
  // pairs), VPMADDWD (pairs of those into int32), VPADDD. Each chain multiplies its own
  // accumulator's bytes: with operands shared by every chain, GCC computed the products once a
  // round and measured VPADDD (bench/README.md, Zen 3 2026-12-08). The values wrap and do not
  // matter.
  const __m256i x = _mm256_set1_epi8(static_cast<char>(1 + static_cast<int>(seed) % 3));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kAccumulators];
#pragma GCC unroll 12
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm256_set1_epi32(j);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j)
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(x, acc[j]), ones));
  }
#pragma GCC unroll 12
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm256_add_epi32(acc[0], acc[j]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  float sum = 0;
  for (int32_t v : lanes) sum += static_cast<float>(v);
  return sum;
}

}  // namespace dsinfer::bench_detail
