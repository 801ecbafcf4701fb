// Next-token sampling (src/engine/sampler.h): argmax at temperature 0, a draw from
// softmax(logits / T) otherwise (docs/REFERENCE.md section 5).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace dsinfer::sampler_test {
namespace {

std::vector<double> softmax_over_t(const std::vector<float>& logits, double t) {
  double m = -1e300, sum = 0;
  for (float v : logits) m = std::max(m, double(v) / t);
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(double(logits[i]) / t - m);
  for (double& v : p) v /= sum;
  return p;
}

int64_t first_argmax(const std::vector<float>& x) {
  int64_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[best]) best = static_cast<int64_t>(i);
  return best;
}

TEST(Sampler, TemperatureZeroIsArgmax) {
  Sampler sampler(965);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<float> logits(1 + trial % 300);
    for (float& v : logits) v = dist(rng);
    const std::vector<float> copy = logits;
    ASSERT_EQ(sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), 0.0f),
              first_argmax(logits));
    ASSERT_EQ(logits, copy);  // not modified
  }
  const std::vector<float> ties = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(sampler.sample(ties.data(), 5, 0.0f), 1);   // the first of equal maxima
  EXPECT_EQ(sampler.sample(ties.data(), 5, -1.0f), 1);  // negative: greedy as well
}

void check_distribution(const std::vector<float>& logits, float t, uint64_t seed) {
  const int n_draws = 200000;
  Sampler sampler(seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n_draws; ++i) {
    const int64_t id = sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), t);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int64_t>(logits.size()));
    ++counts[id];
  }
  const std::vector<double> p = softmax_over_t(logits, t);
  double chi2 = 0, max_dev = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double freq = double(counts[i]) / n_draws;
    max_dev = std::max(max_dev, std::abs(freq - p[i]));
    const double expected = p[i] * n_draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(max_dev, 0.005) << "T=" << t;
  // 5 degrees of freedom: P(chi2 > 25) ~ 1.4e-4
  EXPECT_LT(chi2, 25.0) << "T=" << t;
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmaxOverTemperature) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f};
  check_distribution(logits, 1.0f, 1);
  check_distribution(logits, 0.6f, 2);
  check_distribution(logits, 2.5f, 3);
  // large logits: the temperature division and the max subtraction keep it finite
  const std::vector<float> big = {1000.0f, 999.0f, 998.5f, 1001.0f, 990.0f, 1000.5f};
  check_distribution(big, 1.0f, 4);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.0f, -0.1f, 0.3f, 0.05f, 0.15f, -0.2f};
  auto draws = [&](uint64_t seed) {
    Sampler s(seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 1000; ++i) out.push_back(s.sample(logits.data(), 8, 1.0f));
    return out;
  };
  const std::vector<int64_t> a = draws(965), b = draws(965), c = draws(966);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
  EXPECT_GT(differ, 500);  // independent streams: ~7/8 of draws differ
  // the default seed is the demo's 965
  Sampler d;
  std::vector<int64_t> e;
  for (int i = 0; i < 1000; ++i) e.push_back(d.sample(logits.data(), 8, 1.0f));
  EXPECT_EQ(e, a);
  // every id appears: the draws really vary
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 8u);
}

TEST(Sampler, TinyTemperatureBehavesLikeArgmax) {
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Sampler sampler(5);
  for (float t : {1e-3f, 1e-5f, 1e-7f, 1e-30f, 1e-40f, 1e-45f}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> logits(64);
      for (float& v : logits) v = dist(rng);
      // make the winner clear by 0.1 (at T = 1e-3 the runner-up has probability < e^-100)
      const int64_t best = first_argmax(logits);
      logits[best] += 0.1f;
      ASSERT_EQ(sampler.sample(logits.data(), 64, t), best) << "T=" << t;
    }
  }
}

TEST(Sampler, TemperatureBelowFloorActsAsFloor) {
  // the reference divides by max(T, 1e-5): two logits 1e-5 apart keep a real choice even at T -> 0
  const std::vector<float> logits = {1.0f, 1.0f - 1e-5f, -5.0f};
  const double d = (double(logits[0]) - double(logits[1])) / double(1e-5f);
  const double p0 = 1.0 / (1.0 + std::exp(-d));  // the third logit is negligible
  for (float t : {1e-5f, 1e-9f, 1e-30f}) {
    Sampler sampler(77);
    int zeros = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const int64_t id = sampler.sample(logits.data(), 3, t);
      ASSERT_TRUE(id == 0 || id == 1) << id;
      zeros += id == 0;
    }
    EXPECT_NEAR(zeros / double(n), p0, 0.01) << "T=" << t;
  }
}

TEST(Sampler, MinusInfinityLogitsAreNeverDrawn) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 0.0f, -inf, 0.0f, -inf};
  Sampler sampler(8);
  int ones = 0;
  for (int i = 0; i < 20000; ++i) {
    const int64_t id = sampler.sample(logits.data(), 5, 0.8f);
    ASSERT_TRUE(id == 1 || id == 3) << id;
    ones += id == 1;
  }
  EXPECT_NEAR(ones / 20000.0, 0.5, 0.02);
}

}  // namespace
}  // namespace dsinfer::sampler_test
