// softmax_fast's AVX-512 form (ops.h): 16 lanes, exp from a polynomial. Compiled with AVX-512
// flags; reached only where the kernel config's ISA is AVX-512.
#include <immintrin.h>

#include <cstdint>

#include "kernels/ops.h"

namespace dsinfer {
namespace {

// e^x for x <= 0 (the max-subtracted logits), relative error ~1e-7 down to x = -87, exactly 0 from
// x <= -104 on: e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln 2 / 2 (ln 2 in two parts, so
// r is exact), e^r by Cephes' degree-7 polynomial, 2^n applied by VSCALEFPS (subnormals included).
__m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

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
