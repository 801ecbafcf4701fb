// e^x on 16 lanes for the softmaxes of fast mode. Include only from *_avx512.cpp / *_amx.cpp
// files (compiled with AVX-512 flags).
#pragma once

#include <immintrin.h>

namespace dsinfer {

// e^x for x <= 0 (the max-subtracted logits), relative error ~1e-7 down to x = -87, exactly 0 from
// x <= -104 on: e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln 2 / 2 (ln 2 in two parts, so
// r is exact), e^r by Cephes' degree-7 polynomial, 2^n applied by VSCALEFPS (subnormals included).
inline __m512 exp_nonpositive(__m512 x) {
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

}  // namespace dsinfer
