// The int4 / int8 formats of convert --experts-int4 / --int8 (kernels/group_quant.h): the
// quantizer's rounding rule, the stored layout, and the fp16 scale conversion.
#include "kernels/group_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"

namespace dsinfer::group_quant_test {
namespace {

TEST(GroupQuant, F32ToF16RoundsToNearestEvenAndRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00) continue;  // infinities and NaNs
    ASSERT_EQ(f32_to_f16(f16_to_f32(bits)), bits) << std::hex << h;
    // halfway to the next half up rounds to the even one of the two
    const uint16_t next = static_cast<uint16_t>(bits + 1);
    if ((next & 0x7c00) == 0x7c00 || (bits & 0x8000) != (next & 0x8000)) continue;
    const float mid = (f16_to_f32(bits) + f16_to_f32(next)) / 2;  // exact in fp32
    ASSERT_EQ(f32_to_f16(mid), (bits & 1) ? next : bits) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1e-9f), 0);  // below half the smallest subnormal
}

// Per group: scale = fp16(max |w| / qmax), q = round(w / scale) within [-qmax, qmax], so each
// weight is within half a step of its value (and the group's largest is hit to within fp16
// rounding).
void expect_round_to_nearest(QuantFormat format, const std::vector<float>& w) {
  const int64_t cols = static_cast<int64_t>(w.size());
  const int qmax = format == QuantFormat::kInt4 ? 7 : 127;
  std::vector<uint8_t> out(static_cast<size_t>(quant_row_bytes(format, cols)), 0x5a);
  std::vector<uint16_t> scales(static_cast<size_t>(quant_groups(cols)));
  quantize_row(format, w.data(), cols, out.data(), scales.data());
  std::vector<float> back(w.size());
  dequantize_quant_row(format, out.data(), scales.data(), cols, back.data());
  for (int64_t g = 0; g < quant_groups(cols); ++g) {
    float amax = 0;
    for (int64_t k = g * 128; k < std::min(cols, g * 128 + 128); ++k)
      amax = std::max(amax, std::fabs(w[k]));
    ASSERT_EQ(scales[g], f32_to_f16(amax / static_cast<float>(qmax))) << "group " << g;
    const float s = f16_to_f32(scales[g]);
    for (int64_t k = g * 128; k < std::min(cols, g * 128 + 128); ++k) {
      const float q = back[k] / s;
      ASSERT_EQ(q, std::nearbyint(q)) << k;
      ASSERT_LE(std::fabs(q), qmax) << k;
      if (std::fabs(w[k] / s) < qmax)
        ASSERT_LE(std::fabs(back[k] - w[k]), 0.5f * s * (1 + 1e-6f)) << k;
    }
  }
  if (format == QuantFormat::kInt4)  // padding columns hold q = 0 (nibble 8)
    for (int64_t k = cols; k < (cols + 31) / 32 * 32; ++k) {
      const uint8_t b = out[static_cast<size_t>(16 * (k / 32) + k % 16)];
      ASSERT_EQ(k % 32 < 16 ? b & 15 : b >> 4, 8) << "padding column " << k;
    }
}

TEST(GroupQuant, EachGroupRoundsToNearestWithItsOwnScale) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (QuantFormat format : {QuantFormat::kInt4, QuantFormat::kInt8}) {
    for (int64_t cols : {1, 17, 32, 100, 128, 129, 300, 2048}) {
      SCOPED_TRACE(testing::Message() << quant_format_name(format) << " cols " << cols);
      std::vector<float> w(static_cast<size_t>(cols));
      for (size_t i = 0; i < w.size(); ++i) w[i] = normal(rng) * (i / 128 % 2 ? 100.0f : 0.01f);
      expect_round_to_nearest(format, w);
    }
  }
}

TEST(GroupQuant, LayoutOfInt4IsLowThenHighNibblesOf16Bytes) {
  std::vector<float> w(64);
  for (int k = 0; k < 64; ++k)
    w[k] = static_cast<float>(k % 15 - 7);  // q = k % 15 - 7 with scale 1
  std::vector<uint8_t> out(32);
  std::vector<uint16_t> scale(1);
  quantize_row(QuantFormat::kInt4, w.data(), 64, out.data(), scale.data());
  EXPECT_EQ(f16_to_f32(scale[0]), 1.0f);
  for (int k = 0; k < 64; ++k) {
    const uint8_t b = out[static_cast<size_t>(16 * (k / 32) + k % 16)];
    EXPECT_EQ((k % 32 < 16 ? b & 15 : b >> 4) - 8, k % 15 - 7) << k;
    EXPECT_EQ(int4_q(out.data(), k), k % 15 - 7) << k;
  }
}

TEST(GroupQuant, AZeroGroupHasScaleZeroAndBadWeightsAreRefused) {
  std::vector<float> w(200, 0.0f);
  w[150] = 3.0f;
  std::vector<uint8_t> out(200);
  std::vector<uint16_t> scales(2);
  quantize_row(QuantFormat::kInt8, w.data(), 200, out.data(), scales.data());
  EXPECT_EQ(scales[0], 0);
  EXPECT_EQ(static_cast<int8_t>(out[150]), 127);
  w[3] = NAN;
  EXPECT_THROW(quantize_row(QuantFormat::kInt8, w.data(), 200, out.data(), scales.data()), Error);
  w[3] = 1e9f;
  EXPECT_THROW(quantize_row(QuantFormat::kInt4, w.data(), 200, out.data(), scales.data()), Error);
}

}  // namespace
}  // namespace dsinfer::group_quant_test
