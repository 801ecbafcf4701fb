// AVX-512 loops of the ceiling measurements (compiled with -mavx512*; call only after
// cpu_supports(Isa::kAvx512)).
#include <immintrin.h>

#include "bench/ceilings.h"

namespace dsinfer::bench_detail {

// Horizontal sums through memory: GCC 12's _mm512_reduce_add_* warn about their own
// uninitialized temporaries (-Wuninitialized), and speed does not matter here.
namespace {
uint64_t lane_sum(__m512i v) {
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, v);
  uint64_t sum = 0;
  for (uint64_t x : lanes) sum += x;
  return sum;
}
float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}
}  // namespace

uint64_t read_sum_avx512(const uint8_t* p, int64_t bytes) {
  // four independent integer adds per 256 bytes: one cycle of latency each, so the loop is
  // bound by the loads alone
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  return lane_sum(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

float fma_loop_avx512(int64_t iterations, float seed) {
  // acc = acc * m + c converges to c / (1 - m): no overflow, no denormals, however long it runs
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(seed * 1e-3f);
  __m512 acc[kAccumulators];
#pragma GCC unroll 12
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_set1_ps(seed + static_cast<float>(j));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
  }
#pragma GCC unroll 12
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return lane_sum(acc[0]);
}

float bf16_loop_avx512(int64_t iterations, float seed) {
  // 32 bf16 pairs per lane group; the products are tiny so the sums stay finite for 1e10 steps
  const __m512 small = _mm512_set1_ps(seed * 1e-3f);
  const __m512bh x = _mm512_cvtne2ps_pbh(small, small), y = x;
  __m512 acc[kAccumulators];
#pragma GCC unroll 12
  for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccumulators; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
  }
#pragma GCC unroll 12
  for (int j = 1; j < kAccumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return lane_sum(acc[0]);
}

}  // namespace dsinfer::bench_detail
