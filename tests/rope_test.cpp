// RoPE with YaRN (src/model/rope.h) against the reference's precompute_freqs_cis and MLA softmax
// scale, written out here in double (docs/REFERENCE.md section 4).
#include "model/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "model/config.h"

namespace dsinfer::rope_test {
namespace {

ModelConfig v3_config() {
  ModelConfig c;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.rope_theta = 10000;
  c.rope_factor = 40;
  c.beta_fast = 32;
  c.beta_slow = 1;
  c.original_seq_len = 4096;
  c.max_seq_len = 16384;
  c.mscale = 1.0;
  return c;
}

// tiny-v3 / tiny-v2-lite: rope dim 16, nope 32
ModelConfig tiny_config() {
  ModelConfig c = v3_config();
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 16;
  return c;
}

struct Yarn {
  std::vector<double> base;   // theta^(-2i/d)
  std::vector<double> freqs;  // after the correction (== base when inactive)
  bool active = false;
  double low = 0, high = 0;  // the ramp's ends (after clamping and the equal-ends nudge)
};

// YaRN as the reference defines it, in double.
Yarn yarn_reference(const ModelConfig& c) {
  const int d = c.qk_rope_head_dim;
  const double theta = c.rope_theta;
  Yarn y;
  for (int i = 0; i < d / 2; ++i) y.base.push_back(1.0 / std::pow(theta, 2.0 * i / d));
  y.freqs = y.base;
  if (c.max_seq_len <= c.original_seq_len) return y;
  y.active = true;
  // dimension index at which the wavelength makes `rotations` turns over original_seq_len
  auto corr = [&](double rotations) {
    return d * std::log(c.original_seq_len / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(theta));
  };
  y.low = std::max(std::floor(corr(c.beta_fast)), 0.0);
  y.high = std::min(std::ceil(corr(c.beta_slow)), double(d - 1));
  if (y.low == y.high) y.high += 0.001;
  for (int i = 0; i < d / 2; ++i) {
    const double ramp = std::clamp((i - y.low) / (y.high - y.low), 0.0, 1.0);
    // ramp 0 keeps the frequency (fast dims), ramp 1 divides it by the factor (slow dims)
    y.freqs[i] = y.base[i] / c.rope_factor * ramp + y.base[i] * (1.0 - ramp);
  }
  return y;
}

void expect_frequencies_match(const ModelConfig& c, const char* what) {
  const Yarn ref = yarn_reference(c);
  const std::vector<float> got = rope_frequencies(c);
  ASSERT_EQ(got.size(), ref.freqs.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(std::abs(got[i] - ref.freqs[i]) / ref.freqs[i], 1e-6)
        << what << " i=" << i << " got " << got[i] << " want " << ref.freqs[i];
}

TEST(Rope, YarnFrequenciesV3Config) {
  const ModelConfig c = v3_config();
  const Yarn ref = yarn_reference(c);
  // the formula's own landmarks for d=64: ramp from index 10 to 23
  ASSERT_TRUE(ref.active);
  EXPECT_EQ(ref.low, 10.0);
  EXPECT_EQ(ref.high, 23.0);
  expect_frequencies_match(c, "v3");

  const std::vector<float> f = rope_frequencies(c);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f[0], 1.0f);         // first frequency unchanged
  for (int i = 0; i <= 10; ++i)  // below the ramp: unchanged
    EXPECT_LT(std::abs(f[i] - ref.base[i]) / ref.base[i], 1e-6) << i;
  for (int i = 23; i < 32; ++i)  // above the ramp: divided by the factor
    EXPECT_LT(std::abs(f[i] - ref.base[i] / 40.0) / (ref.base[i] / 40.0), 1e-6) << i;
  for (int i = 11; i < 23; ++i) {  // inside: strictly between, and interpolated linearly
    EXPECT_LT(f[i], ref.base[i] * (1 - 1e-6)) << i;
    EXPECT_GT(f[i], ref.base[i] / 40.0 * (1 + 1e-6)) << i;
    const double ramp = (i - 10) / 13.0;
    const double want = ref.base[i] * (1 - ramp) + ref.base[i] / 40.0 * ramp;
    EXPECT_LT(std::abs(f[i] - want) / want, 1e-6) << i;
  }
  // frequencies decrease monotonically
  for (int i = 1; i < 32; ++i) EXPECT_LT(f[i], f[i - 1]) << i;
}

TEST(Rope, YarnFrequenciesTinyRopeDim16) {
  const ModelConfig c = tiny_config();
  const Yarn ref = yarn_reference(c);
  ASSERT_TRUE(ref.active);
  EXPECT_EQ(ref.low, 2.0);
  EXPECT_EQ(ref.high, 6.0);
  expect_frequencies_match(c, "tiny");
  const std::vector<float> f = rope_frequencies(c);
  ASSERT_EQ(f.size(), 8u);
  EXPECT_EQ(f[0], 1.0f);
  for (int i = 0; i <= 2; ++i) EXPECT_LT(std::abs(f[i] - ref.base[i]) / ref.base[i], 1e-6) << i;
  for (int i = 6; i < 8; ++i)
    EXPECT_LT(std::abs(f[i] - ref.base[i] / 40.0) / (ref.base[i] / 40.0), 1e-6) << i;
  for (int i = 3; i < 6; ++i) {
    EXPECT_LT(f[i], ref.base[i] * (1 - 1e-6)) << i;
    EXPECT_GT(f[i], ref.base[i] / 40.0 * (1 + 1e-6)) << i;
  }
}

TEST(Rope, NoCorrectionUpToOriginalSeqLen) {
  for (ModelConfig c : {v3_config(), tiny_config()}) {
    for (int len : {16, 4095, 4096}) {
      c.max_seq_len = len;
      const Yarn ref = yarn_reference(c);
      ASSERT_FALSE(ref.active);
      const std::vector<float> f = rope_frequencies(c);
      ASSERT_EQ(f.size(), ref.base.size());
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_LT(std::abs(f[i] - ref.base[i]) / ref.base[i], 1e-6) << len << " " << i;
      EXPECT_EQ(f[0], 1.0f);
    }
    // one past the original length switches the correction on
    c.max_seq_len = 4097;
    const std::vector<float> f = rope_frequencies(c);
    const Yarn ref = yarn_reference(c);
    ASSERT_TRUE(ref.active);
    EXPECT_LT(std::abs(f.back() - ref.base.back() / 40.0) / (ref.base.back() / 40.0), 1e-6);
    expect_frequencies_match(c, "4097");
  }
}

TEST(Rope, YarnFrequenciesOtherParameters) {
  // clamps: a huge beta_fast puts low below 0; a small theta puts high above d-1
  ModelConfig a = tiny_config();
  a.beta_fast = 1000;
  ASSERT_EQ(yarn_reference(a).low, 0.0);
  expect_frequencies_match(a, "low clamped");
  ModelConfig b = tiny_config();
  b.rope_theta = 10;
  ASSERT_EQ(yarn_reference(b).high, 15.0);
  expect_frequencies_match(b, "high clamped");
  ModelConfig c = v3_config();
  c.rope_theta = 50000;
  c.rope_factor = 8;
  c.original_seq_len = 8192;
  c.max_seq_len = 65536;
  c.beta_fast = 16;
  c.beta_slow = 2;
  expect_frequencies_match(c, "theta 5e4 factor 8");
  ModelConfig d = v3_config();
  d.qk_rope_head_dim = 128;
  expect_frequencies_match(d, "dim 128");
}

TEST(Rope, AttentionSoftmaxScale) {
  const double ln40 = std::log(40.0);
  // V3: qk_head_dim 192, mscale 1.0, YaRN active
  ModelConfig v3 = v3_config();
  const double m3 = 0.1 * 1.0 * ln40 + 1.0;
  const double want_v3 = std::pow(192.0, -0.5) * m3 * m3;
  EXPECT_LT(std::abs(attention_softmax_scale(v3) - want_v3) / want_v3, 1e-6);
  // V2-Lite: mscale 0.707
  ModelConfig v2 = v3_config();
  v2.mscale = 0.707;
  const double m2 = 0.1 * 0.707 * ln40 + 1.0;
  const double want_v2 = std::pow(192.0, -0.5) * m2 * m2;
  EXPECT_LT(std::abs(attention_softmax_scale(v2) - want_v2) / want_v2, 1e-6);
  EXPECT_GT(std::abs(want_v2 - want_v3) / want_v3, 0.05);  // the two cases differ
  // tiny: qk_head_dim 48
  ModelConfig tiny = tiny_config();
  tiny.mscale = 0.707;
  const double want_tiny = std::pow(48.0, -0.5) * m2 * m2;
  EXPECT_LT(std::abs(attention_softmax_scale(tiny) - want_tiny) / want_tiny, 1e-6);
  // no YaRN: no mscale at all
  for (ModelConfig c : {v3, v2, tiny}) {
    c.max_seq_len = c.original_seq_len;
    const double want = std::pow(double(c.qk_head_dim()), -0.5);
    EXPECT_LT(std::abs(attention_softmax_scale(c) - want) / want, 1e-6) << c.qk_head_dim();
  }
  // another factor
  ModelConfig f = v3_config();
  f.rope_factor = 4;
  const double m4 = 0.1 * std::log(4.0) + 1.0;
  EXPECT_LT(std::abs(attention_softmax_scale(f) - std::pow(192.0, -0.5) * m4 * m4) /
                (std::pow(192.0, -0.5) * m4 * m4),
            1e-6);
}

// Rotates interleaved pairs of x by pos * freqs[i] as complex numbers, in double.
std::vector<double> rotate_reference(const std::vector<float>& x,
                                     const std::vector<double>& angles) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    const std::complex<double> v(x[2 * i], x[2 * i + 1]);
    const std::complex<double> r = v * std::polar(1.0, angles[i]);
    y[2 * i] = r.real();
    y[2 * i + 1] = r.imag();
  }
  return y;
}

void check_apply(const ModelConfig& c) {
  const int d = c.qk_rope_head_dim;
  const std::vector<float> freqs = rope_frequencies(c);
  const Yarn ref = yarn_reference(c);
  Rope rope(c);
  ASSERT_EQ(rope.half_dim(), d / 2);
  rope.prepare(0, c.max_seq_len);
  std::mt19937 rng(2024 + d);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int pos : {0, 1, 2, 1000, 4097, 16383}) {
    ASSERT_LT(pos, c.max_seq_len);
    std::vector<float> x(d);
    for (float& v : x) v = dist(rng);
    std::vector<float> y = x;
    rope.apply(y.data(), pos);

    // (1) tight: the angle as the reference forms it (fp32 outer product of positions and
    // fp32 frequencies), the rotation in double
    std::vector<double> angles_fp32(d / 2), angles_exact(d / 2);
    for (int i = 0; i < d / 2; ++i) {
      angles_fp32[i] = static_cast<float>(static_cast<float>(pos) * freqs[i]);
      angles_exact[i] = pos * ref.freqs[i];
    }
    const std::vector<double> want = rotate_reference(x, angles_fp32);
    for (int j = 0; j < d; ++j) ASSERT_NEAR(y[j], want[j], 2e-6) << "pos " << pos << " j " << j;

    // (2) loose: the angle entirely in double from the YaRN formula (fp32 angle rounding at
    // large positions is ~1e-3 rad)
    const std::vector<double> exact = rotate_reference(x, angles_exact);
    const double tol = pos < 2000 ? 5e-4 : 6e-3;
    for (int j = 0; j < d; ++j) ASSERT_NEAR(y[j], exact[j], tol) << "pos " << pos << " j " << j;

    // norm of every pair preserved
    for (int i = 0; i < d / 2; ++i) {
      const double before = std::hypot(double(x[2 * i]), double(x[2 * i + 1]));
      const double after = std::hypot(double(y[2 * i]), double(y[2 * i + 1]));
      ASSERT_NEAR(after, before, 1e-6 * before + 1e-7) << pos << " " << i;
    }
    if (pos == 0) {
      for (int j = 0; j < d; ++j) EXPECT_EQ(y[j], x[j]) << j;
    }
  }
}

TEST(Rope, ApplyRotatesInterleavedPairsV3) { check_apply(v3_config()); }
TEST(Rope, ApplyRotatesInterleavedPairsTiny) { check_apply(tiny_config()); }

TEST(Rope, ApplyUnitVectorsShowPairLayout) {
  const ModelConfig c = tiny_config();
  const std::vector<float> freqs = rope_frequencies(c);
  Rope rope(c);
  rope.prepare(5, 1);  // position 5 at index 0
  for (int i = 0; i < 8; ++i) {
    // e_{2i} -> (cos, sin) in slots 2i, 2i+1; nothing else moves
    std::vector<float> x(16, 0.0f);
    x[2 * i] = 1.0f;
    rope.apply(x.data(), 0);
    const double angle = static_cast<float>(5.0f * freqs[i]);
    for (int j = 0; j < 16; ++j) {
      double want = 0;
      if (j == 2 * i) want = std::cos(angle);
      if (j == 2 * i + 1) want = std::sin(angle);
      EXPECT_NEAR(x[j], want, 1e-6) << "i " << i << " j " << j;
    }
    // e_{2i+1} -> (-sin, cos)
    std::vector<float> z(16, 0.0f);
    z[2 * i + 1] = 1.0f;
    rope.apply(z.data(), 0);
    EXPECT_NEAR(z[2 * i], -std::sin(angle), 1e-6);
    EXPECT_NEAR(z[2 * i + 1], std::cos(angle), 1e-6);
  }
}

TEST(Rope, PrepareWithOffsetMatchesAbsolutePosition) {
  const ModelConfig c = v3_config();
  Rope full(c), window(c);
  full.prepare(0, 1010);
  window.prepare(1000, 10);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int index = 0; index < 10; ++index) {
    std::vector<float> x(64);
    for (float& v : x) v = dist(rng);
    std::vector<float> a = x, b = x;
    full.apply(a.data(), 1000 + index);
    window.apply(b.data(), index);
    for (int j = 0; j < 64; ++j) ASSERT_EQ(a[j], b[j]) << index << " " << j;
  }
  // prepare again with another window: the table is replaced
  window.prepare(3, 2);
  std::vector<float> x(64, 0.5f), a = x, b = x;
  full.apply(a.data(), 4);
  window.apply(b.data(), 1);
  for (int j = 0; j < 64; ++j) ASSERT_EQ(a[j], b[j]) << j;
}

}  // namespace
}  // namespace dsinfer::rope_test
