// Row-wise and elementwise ops (src/kernels/ops.h) against double-precision formulas written here.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dsinfer::ops_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_vector(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// w * x / sqrt(mean(x^2) + eps), in double.
std::vector<double> rms_norm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                       int64_t rows, int64_t dim, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean_sq = 0;
    for (int64_t i = 0; i < dim; ++i) mean_sq += double(x[r * dim + i]) * double(x[r * dim + i]);
    mean_sq /= double(dim);
    const double denom = std::sqrt(mean_sq + eps);
    for (int64_t i = 0; i < dim; ++i)
      y[r * dim + i] = double(w[i]) * double(x[r * dim + i]) / denom;
  }
  return y;
}

TEST(Ops, RmsNormMatchesDoubleFormula) {
  std::mt19937 rng(1234);
  const float eps = 1e-6f;
  for (int64_t dim : {1, 2, 3, 7, 16, 64, 127, 128, 1000, 7168}) {
    for (float scale : {1e-3f, 1.0f, 50.0f}) {
      const int64_t rows = 4;
      std::vector<float> x = random_vector(rng, rows * dim, -scale, scale);
      std::vector<float> w = random_vector(rng, dim, -2.0f, 2.0f);
      std::vector<float> y(rows * dim, std::nanf(""));
      rms_norm(x.data(), w.data(), rows, dim, eps, y.data());
      const std::vector<double> ref = rms_norm_reference(x, w, rows, dim, eps);
      // |y| can reach |w| * sqrt(dim); the error of an fp32 result is relative to that size
      for (int64_t i = 0; i < rows * dim; ++i)
        ASSERT_NEAR(y[i], ref[i], 2e-6 * std::abs(ref[i]) + 1e-6)
            << "dim " << dim << " scale " << scale << " index " << i;
    }
  }
}

TEST(Ops, RmsNormUsesEpsAndEachRowSeparately) {
  // eps matters when mean(x^2) is comparable: x = 1e-3 everywhere, mean 1e-6 -> 1/sqrt(2e-6)
  const int64_t dim = 8;
  std::vector<float> x(2 * dim, 1e-3f), w(dim, 1.0f), y(2 * dim);
  for (int64_t i = 0; i < dim; ++i) x[dim + i] = 3.0f;  // second row differs
  rms_norm(x.data(), w.data(), 2, dim, 1e-6f, y.data());
  for (int64_t i = 0; i < dim; ++i) {
    EXPECT_NEAR(y[i], 1e-3 / std::sqrt(1e-6 + 1e-6), 1e-6);
    EXPECT_NEAR(y[dim + i], 3.0 / std::sqrt(9.0 + 1e-6), 1e-6);
  }
  // an all-zero row gives zeros, not NaN
  std::vector<float> zeros(dim, 0.0f), out(dim, 1.0f);
  rms_norm(zeros.data(), w.data(), 1, dim, 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(Ops, RmsNormInPlaceEqualsOutOfPlace) {
  std::mt19937 rng(99);
  for (int64_t dim : {5, 64, 513}) {
    const int64_t rows = 3;
    std::vector<float> x = random_vector(rng, rows * dim, -4.0f, 4.0f);
    std::vector<float> w = random_vector(rng, dim, 0.5f, 1.5f);
    std::vector<float> y(rows * dim);
    rms_norm(x.data(), w.data(), rows, dim, 1e-6f, y.data());
    std::vector<float> inplace = x;
    rms_norm(inplace.data(), w.data(), rows, dim, 1e-6f, inplace.data());
    for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(inplace[i], y[i]) << dim << " " << i;
  }
}

TEST(Ops, SiluMulMatchesDoubleFormula) {
  std::mt19937 rng(7);
  std::vector<float> a = random_vector(rng, 4096, -20.0f, 20.0f);
  std::vector<float> b = random_vector(rng, 4096, -3.0f, 3.0f);
  // extremes: exp overflow must not produce NaN
  const float extremes[] = {0.0f,     -0.0f,   1e-8f, -100.0f, 100.0f,
                            -1000.0f, 1000.0f, 88.0f, -88.0f,  -89.0f};
  for (float e : extremes) {
    a.push_back(e);
    b.push_back(1.5f);
  }
  std::vector<float> out = a;
  silu_mul(out.data(), b.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i];
    const double ref = x / (1.0 + std::exp(-x)) * double(b[i]);
    ASSERT_FALSE(std::isnan(out[i])) << a[i];
    ASSERT_NEAR(out[i], ref, 2e-6 * std::abs(ref) + 1e-30) << "a " << a[i] << " b " << b[i];
  }
}

std::vector<double> softmax_reference(const std::vector<float>& x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, double(v));
  double sum = 0;
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp(double(x[i]) - m);
  for (double& v : p) v /= sum;
  return p;
}

void expect_softmax_matches(const std::vector<float>& x,
                            void (*normalize)(float*, int64_t) = softmax) {
  std::vector<float> p = x;
  normalize(p.data(), static_cast<int64_t>(p.size()));
  const std::vector<double> ref = softmax_reference(x);
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(std::isnan(p[i])) << i;
    ASSERT_GE(p[i], 0.0f);
    ASSERT_NEAR(p[i], ref[i], 1e-5 * ref[i] + 1e-12) << "index " << i << " of " << x.size();
    sum += p[i];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(Ops, SoftmaxMatchesDoubleAndSumsToOne) {
  std::mt19937 rng(42);
  for (size_t n : {1, 2, 6, 64, 160, 256, 2048, 102400}) {
    for (float spread : {0.1f, 3.0f, 30.0f})
      expect_softmax_matches(random_vector(rng, n, -spread, spread));
  }
}

// softmax_fast (a polynomial exp on AVX-512): the same bounds as softmax, on every length
// around the 16-lane vectors, on spreads deep into exp's subnormal range and beyond it.
TEST(Ops, SoftmaxFastMatchesDoubleAndSumsToOne) {
  std::mt19937 rng(43);
  void (*fast)(float*, int64_t) = [](float* x, int64_t n) { softmax_fast(best_isa(), x, n); };
  for (size_t n : {1, 2, 15, 16, 17, 64, 160, 513, 102400}) {
    for (float spread : {0.1f, 3.0f, 30.0f, 200.0f})
      expect_softmax_matches(random_vector(rng, n, -spread, spread), fast);
  }
  expect_softmax_matches({1000.0f, 999.0f, 998.0f, 0.0f, -1000.0f}, fast);
  std::vector<float> far = {0.0f, -104.0f, -500.0f, -kInf};  // far below the max: exactly 0
  fast(far.data(), 4);
  EXPECT_EQ(far[0], 1.0f);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(far[i], 0.0f) << i;
}

TEST(Ops, SoftmaxLargeValuesDoNotOverflow) {
  expect_softmax_matches({1000.0f, 999.0f, 998.0f, 0.0f, -1000.0f});
  expect_softmax_matches({1e30f, 1e30f});
  std::vector<float> x = {1000.0f, 1000.0f, 1000.0f, 1000.0f};
  softmax(x.data(), 4);
  for (float v : x) EXPECT_FLOAT_EQ(v, 0.25f);
  std::vector<float> single = {12345.0f};
  softmax(single.data(), 1);
  EXPECT_EQ(single[0], 1.0f);
}

TEST(Ops, SoftmaxMinusInfinityGivesExactZero) {
  std::vector<float> x = {-kInf, 1.0f, -kInf, 2.0f, 0.5f, -kInf};
  std::vector<float> p = x;
  softmax(p.data(), static_cast<int64_t>(p.size()));
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_EQ(p[5], 0.0f);
  expect_softmax_matches(x);
  // one finite entry among -inf takes everything
  std::vector<float> q = {-kInf, -kInf, -3.0f, -kInf};
  softmax(q.data(), 4);
  EXPECT_EQ(q[2], 1.0f);
  EXPECT_EQ(q[0] + q[1] + q[3], 0.0f);
}

// The AVX2 exp is libm's expf to the bit on the floats softmax gives it (x - max <= 0): every 61st
// float of [-104, 0] (a stride coprime with the 8 lanes; DSINFER_EXHAUSTIVE=1 takes all 1.1e9,
// ~10 s, which matched when written), the edges of the underflow and the specials.
TEST(Ops, ExpAvx2IsLibmExpToTheBit) {
  if (!cpu_supports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const char* exhaustive = std::getenv("DSINFER_EXHAUSTIVE");
  const uint32_t stride = exhaustive && std::string(exhaustive) == "1" ? 1 : 61;
  const uint32_t top = std::bit_cast<uint32_t>(104.0f);
  std::vector<float> x, y(1 << 16);
  auto check = [&] {
    exp_nonpositive_avx2(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(std::exp(x[i])))
          << std::hexfloat << x[i];
    x.clear();
  };
  for (uint64_t m = 0; m <= top; m += stride) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(m) | 0x80000000u));
    if (x.size() == y.size()) check();
  }
  for (float edge : {-0x1.9fe368p6f, -0x1.9d1d9ep6f, -87.0f, -88.0f, -0x1p-149f, -0.0f, 0.0f})
    for (const float direction : {-kInf, kInf}) {
      float e = edge;  // the edge and 20 floats on each side of it
      for (int j = 0; j <= 20; ++j, e = std::nextafter(e, direction))
        if (e <= 0.0f) x.push_back(e);
    }
  x.insert(x.end(), {-kInf, -1e30f, -200.0f});
  check();
  std::vector<float> nan = {std::nanf(""), -1.0f, std::nanf(""), 0.0f, -2.0f, -3.0f, -4.0f, -5.0f};
  exp_nonpositive_avx2(nan.data(), nan.data(), 8);
  EXPECT_TRUE(std::isnan(nan[0]) && std::isnan(nan[2]));
  EXPECT_EQ(nan[3], 1.0f);
}

// softmax_avx2 gives softmax_scalar's bits: lengths around the 8 lanes, spreads into the
// underflow, -inf entries, a NaN (skipped by the max as std::fmax skips it).
TEST(Ops, SoftmaxAvx2GivesTheScalarBits) {
  if (!cpu_supports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(44);
  for (size_t n : {1, 7, 8, 9, 15, 16, 17, 64, 65, 4097, 16384})
    for (float spread : {0.1f, 3.0f, 30.0f, 200.0f}) {
      std::vector<float> x = random_vector(rng, n, -spread, spread);
      if (n > 9) x[3] = -kInf;
      if (n > 9 && spread > 100) x[5] = std::nanf("");
      std::vector<float> a = x, b = x;
      softmax_avx2(a.data(), static_cast<int64_t>(n));
      softmax_scalar(b.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
            << "n " << n << " spread " << spread << " index " << i;
    }
}

TEST(Ops, ArgmaxReturnsFirstMaximum) {
  const float a[] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  EXPECT_EQ(argmax(a, 5), 1);
  const float b[] = {5.0f, 5.0f};
  EXPECT_EQ(argmax(b, 2), 0);
  const float c[] = {-kInf, -kInf, -1.0f, -kInf};
  EXPECT_EQ(argmax(c, 4), 2);
  const float d[] = {-kInf, -kInf};
  EXPECT_EQ(argmax(d, 2), 0);
  const float e[] = {-2.0f, -1.0f, kInf, 7.0f, kInf};
  EXPECT_EQ(argmax(e, 5), 2);
  const float f[] = {42.0f};
  EXPECT_EQ(argmax(f, 1), 0);
  // -0 and +0 compare equal: the first one wins
  const float g[] = {-1.0f, -0.0f, 0.0f};
  EXPECT_EQ(argmax(g, 3), 1);
}

TEST(Ops, ArgmaxMatchesLinearScanOnRandomTies) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(0, 9);  // many ties
  for (int trial = 0; trial < 1000; ++trial) {
    const int n = 1 + trial % 50;
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(small(rng));
    int expected = 0;
    for (int i = 0; i < n; ++i)
      if (x[i] > x[expected]) expected = i;
    // first index holding the maximum value
    const float m = *std::max_element(x.begin(), x.end());
    int first = 0;
    while (x[first] != m) ++first;
    ASSERT_EQ(expected, first);
    ASSERT_EQ(argmax(x.data(), n), first) << "trial " << trial;
  }
}

}  // namespace
}  // namespace dsinfer::ops_test
