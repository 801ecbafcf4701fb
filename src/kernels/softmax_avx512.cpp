// softmax_fast's AVX-512 form (ops.h): 16 lanes, exp from a polynomial (exp_avx512.h). Compiled
// with AVX-512 flags; reached only where the kernel config's ISA is AVX-512.
#include <immintrin.h>
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>

#include "kernels/exp_avx512.h"
#include "kernels/ops.h"

namespace dsinfer {
namespace {

__mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

}  // namespace

void softmax_fast_avx512(float* x, int64_t n) {
  __m512 max_v = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16)
    max_v = _mm512_max_ps(max_v, _mm512_mask_loadu_ps(max_v, tail_mask(n - i), x + i));
  const __m512 max_value = _mm512_set1_ps(_mm512_reduce_max_ps(max_v));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max_value));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

}  // namespace dsinfer
