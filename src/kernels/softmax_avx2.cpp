// softmax's AVX2 form (ops.h): the bits of the scalar softmax, several times faster. The exp is
// the algorithm of glibc's expf (2.28 on; ARM's optimized-routines: exp(x) = 2^(k/32) 2^(r/32),
// the 2^(i/32) from a 32-entry table and a cubic in r, all in double) evaluated in four double
// lanes, so each value is libm's to the bit (ops_test holds it to std::exp). The max is exact in
// any order; the sum stays one double chain in index order; the scaling is a multiply per value.
// Compiled with AVX2 flags; reached only where the CPU runs AVX2 and FMA.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/ops.h"

namespace dsinfer {
namespace {

constexpr int kTableBits = 5, kTableSize = 1 << kTableBits;

// tab[i] = bits(2^(i/32)) - (i << 47): adding k << 47 to tab[k % 32] gives the bits of 2^(k/32)
// for any integer k in range (the exponent field takes k / 32). 2^(i/32) rounded once from long
// double: the same doubles as glibc's table (the exhaustive check in ops_test would see any other).
struct Exp2Table {
  uint64_t tab[kTableSize];
  Exp2Table() {
    for (int i = 0; i < kTableSize; ++i) {
      const double v = static_cast<double>(exp2l(static_cast<long double>(i) / kTableSize));
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      tab[i] = bits - (static_cast<uint64_t>(i) << (52 - kTableBits));
    }
  }
};

const Exp2Table& exp2_table() {
  static const Exp2Table table;
  return table;
}

// exp of 4 floats (as doubles) in double: z = x * 32 / ln 2 = k + r (k rounded to nearest even by
// the 1.5 * 2^52 shift), 2^(r/32) by a cubic, times 2^(k/32).
__m128 exp4(__m128 x, const long long* tab) {
  const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+0 * kTableSize);
  const __m256d shift = _mm256_set1_pd(0x1.8p+52);
  constexpr double n = kTableSize;
  const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-5 / n / n / n);
  const __m256d c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-3 / n / n);
  const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-1 / n);
  const __m256d z = _mm256_mul_pd(inv_ln2_n, _mm256_cvtps_pd(x));
  const __m256d shifted = _mm256_add_pd(z, shift);
  const __m256i k = _mm256_castpd_si256(shifted);  // k in the low bits
  const __m256d r = _mm256_sub_pd(z, _mm256_sub_pd(shifted, shift));
  const __m256i entry =
      _mm256_i64gather_epi64(tab, _mm256_and_si256(k, _mm256_set1_epi64x(kTableSize - 1)), 8);
  const __m256d s =
      _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k, 52 - kTableBits)));
  const __m256d p = _mm256_fmadd_pd(_mm256_fmadd_pd(c0, r, c1), _mm256_mul_pd(r, r),
                                    _mm256_fmadd_pd(c2, r, _mm256_set1_pd(1.0)));
  return _mm256_cvtpd_ps(_mm256_mul_pd(p, s));
}

// exp of 8 floats <= 0 (or NaN): below log(2^-150) (-inf included) exactly 0, as libm rounds it.
__m256 exp8_nonpositive(__m256 x, const long long* tab) {
  const __m256 e =
      _mm256_set_m128(exp4(_mm256_extractf128_ps(x, 1), tab), exp4(_mm256_castps256_ps128(x), tab));
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-0x1.9fe368p6f), _CMP_LT_OQ);
  return _mm256_andnot_ps(underflow, e);
}

}  // namespace

void exp_nonpositive_avx2(const float* x, float* y, int64_t n) {
  const long long* tab = reinterpret_cast<const long long*>(exp2_table().tab);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8_nonpositive(_mm256_loadu_ps(x + i), tab));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

void softmax_avx2(float* x, int64_t n) {
  const long long* tab = reinterpret_cast<const long long*>(exp2_table().tab);
  // the max: NaN values are skipped as std::fmax skips them (maxps returns its second operand)
  __m256 max8 = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) max8 = _mm256_max_ps(_mm256_loadu_ps(x + i), max8);
  float lanes[8];
  _mm256_storeu_ps(lanes, max8);
  float max_value = -INFINITY;
  for (float lane : lanes) max_value = std::fmax(max_value, lane);
  for (; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  // exp(x - max) and their sum, one double addition after another in index order
  const __m256 max_v = _mm256_set1_ps(max_value);
  double sum = 0;
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), max_v), tab);
    _mm256_storeu_ps(x + i, e);
    for (int j = 0; j < 8; ++j) sum += x[i + j];
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  const __m256 inv_v = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv_v));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace dsinfer
