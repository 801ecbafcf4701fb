#include "core/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "core/error.h"

namespace dsinfer::dtype_test {
namespace {

TEST(DType, Fp8TableMatchesFieldDecodeForAll256Codes) {
  for (int code = 0; code < 256; ++code) {
    float slow = fp8_e4m3_to_f32_slow(static_cast<uint8_t>(code));
    float fast = fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    if (std::isnan(slow)) {
      EXPECT_TRUE(std::isnan(fast)) << code;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(slow), std::bit_cast<uint32_t>(fast)) << code;
    }
  }
}

TEST(DType, Fp8KnownValues) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_FALSE(std::signbit(fp8_e4m3_to_f32(0x00)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_f32(0x80)));  // -0
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);            // exponent 7 = bias, mantissa 0
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);  // the largest finite value
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x81), -std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));  // largest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));      // smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0x39), 1.125f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x40), 2.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);  // exponent 15 is finite in e4m3fn (no inf)
  EXPECT_EQ(fp8_e4m3_to_f32(0x7d), 416.0f);
  // e4m3fn has no infinity: only the two all-ones codes are not finite.
  int non_finite = 0;
  for (int code = 0; code < 256; ++code)
    if (!std::isfinite(fp8_e4m3_to_f32(static_cast<uint8_t>(code)))) ++non_finite;
  EXPECT_EQ(non_finite, 2);
}

TEST(DType, Fp8CodesAreMonotonic) {
  // Positive codes 0x00..0x7e increase strictly; the negative half mirrors them.
  for (int code = 1; code <= 0x7e; ++code) {
    EXPECT_LT(fp8_e4m3_to_f32(static_cast<uint8_t>(code - 1)),
              fp8_e4m3_to_f32(static_cast<uint8_t>(code)))
        << code;
    EXPECT_EQ(fp8_e4m3_to_f32(static_cast<uint8_t>(code | 0x80)),
              -fp8_e4m3_to_f32(static_cast<uint8_t>(code)))
        << code;
  }
}

uint16_t bf16_of(float f) { return f32_to_bf16(f); }
float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(DType, Bf16ExactValuesRoundTrip) {
  for (float v : {0.0f, 1.0f, -1.0f, 0.5f, 3.0f, -2.75f, 65536.0f, 1e-30f})
    EXPECT_EQ(bf16_to_f32(bf16_of(bf16_to_f32(bf16_of(v)))), bf16_to_f32(bf16_of(v))) << v;
  EXPECT_EQ(bf16_of(1.0f), 0x3f80);
  EXPECT_EQ(bf16_of(-2.0f), 0xc000);
  EXPECT_EQ(bf16_of(-0.0f), 0x8000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    // Every bf16 value converts exactly back to itself (NaN: stays NaN).
    float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(bf16_of(f)))) << b;
    } else {
      ASSERT_EQ(bf16_of(f), b) << b;
    }
  }
}

TEST(DType, Bf16RoundsTiesToEven) {
  // 0x3f80_8000 lies exactly halfway between 0x3f80 (even) and 0x3f81: down to even.
  EXPECT_EQ(bf16_of(from_bits(0x3f808000u)), 0x3f80);
  // 0x3f81_8000 lies halfway between 0x3f81 (odd) and 0x3f82 (even): up to even.
  EXPECT_EQ(bf16_of(from_bits(0x3f818000u)), 0x3f82);
  // Just above / below the tie.
  EXPECT_EQ(bf16_of(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_of(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(bf16_of(from_bits(0x3f817fffu)), 0x3f81);
  // Negative ties mirror the positive ones.
  EXPECT_EQ(bf16_of(from_bits(0xbf808000u)), 0xbf80);
  EXPECT_EQ(bf16_of(from_bits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(bf16_of(from_bits(0xbf808001u)), 0xbf81);
  // Decimal examples: 1 + 2^-8 is a tie (rounds to 1); 1 + 3*2^-8 is a tie going up to 1 + 2^-6.
  EXPECT_EQ(bf16_to_f32(bf16_of(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_f32(bf16_of(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(DType, Bf16CarriesIntoExponentAndOverflowsToInf) {
  // Mantissa all ones + rounding up carries into the exponent: 1.99999 -> 2.
  EXPECT_EQ(bf16_of(from_bits(0x3fffffffu)), 0x4000);
  EXPECT_EQ(bf16_of(from_bits(0x3fff8000u)), 0x4000);  // tie, 0x3fff odd -> up
  EXPECT_EQ(bf16_of(from_bits(0xbfffffffu)), 0xc000);
  // Subnormal -> smallest normal.
  EXPECT_EQ(bf16_of(from_bits(0x007fffffu)), 0x0080);
  // The largest float rounds up past the largest bf16 (0x7f7f) to infinity.
  EXPECT_EQ(bf16_of(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16_of(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(bf16_of(from_bits(0x7f7f8000u)), 0x7f80);  // tie, odd -> up -> inf
  EXPECT_EQ(bf16_of(from_bits(0x7f7f7fffu)), 0x7f7f);  // below the tie stays finite
  EXPECT_EQ(bf16_of(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_of(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(DType, Bf16NanStaysNan) {
  // Signalling NaNs whose payload sits only in the low 16 bits must not turn into infinity.
  for (uint32_t bits : {0x7f800001u, 0x7f80ffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u,
                        0xffc00000u, 0x7f810000u, 0x7fbfffffu}) {
    uint16_t b = bf16_of(from_bits(bits));
    EXPECT_TRUE(std::isnan(bf16_to_f32(b))) << std::hex << bits << " -> " << b;
    EXPECT_TRUE(b & 0x40) << "not a quiet NaN: " << std::hex << bits << " -> " << b;
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(bf16_of(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(bf16_of(std::numeric_limits<float>::signaling_NaN()))));
}

// Independent long-hand conversion: pick whichever of the two neighbouring bf16 values is
// nearer in exact (double) arithmetic; on a tie the one with an even last bit. Overflow follows
// IEEE: the value one bf16 step past the largest finite one stands for infinity.
uint16_t bf16_longhand(float value) {
  if (std::isnan(value)) return 0x7fc0;  // only NaN-ness is compared
  if (std::isinf(value)) return value > 0 ? 0x7f80 : 0xff80;
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const double magnitude = std::fabs(static_cast<double>(value));
  // Candidates: truncate toward zero, and one step up in magnitude.
  const uint16_t low = static_cast<uint16_t>((bits >> 16) & 0x7fff);
  const uint16_t high = static_cast<uint16_t>(low + 1);
  auto value_of = [](uint16_t mag) -> double {
    if (mag == 0x7f80) return std::ldexp(1.0, 128);  // "infinity" sits one step past 0x7f7f
    return static_cast<double>(bf16_to_f32(mag));
  };
  const double below = magnitude - value_of(low);
  const double above = value_of(high) - magnitude;
  uint16_t pick;
  if (below < above)
    pick = low;
  else if (above < below)
    pick = high;
  else
    pick = (low & 1) ? high : low;
  return sign | pick;
}

TEST(DType, Bf16MatchesLongHandOnRandomFloats) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  int compared = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    float v;
    switch (i % 4) {
      case 0:
        v = from_bits(any_bits(rng));
        break;  // every class: NaN, inf, subnormal, huge
      case 1:
        v = normal(rng);
        break;
      case 2:
        v = from_bits((any_bits(rng) & 0xffff0000u) | 0x8000u);
        break;  // exact ties
      default:
        v = from_bits((any_bits(rng) & 0xffff0000u) | (any_bits(rng) & 1 ? 0x7fffu : 0x8001u));
    }
    const uint16_t got = f32_to_bf16(v);
    const uint16_t want = bf16_longhand(v);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(got))) << std::hex << std::bit_cast<uint32_t>(v);
      continue;
    }
    ASSERT_EQ(got, want) << std::hex << "input bits " << std::bit_cast<uint32_t>(v);
    ++compared;
  }
  EXPECT_GT(compared, 1'500'000);
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(DType, SizeNameParseRoundTrip) {
  const std::pair<DType, std::pair<const char*, size_t>> expected[] = {
      {DType::kF32, {"F32", 4}},        {DType::kF16, {"F16", 2}},   {DType::kBF16, {"BF16", 2}},
      {DType::kF8E4M3, {"F8_E4M3", 1}}, {DType::kF64, {"F64", 8}},   {DType::kI64, {"I64", 8}},
      {DType::kI32, {"I32", 4}},        {DType::kI16, {"I16", 2}},   {DType::kI8, {"I8", 1}},
      {DType::kU8, {"U8", 1}},          {DType::kBool, {"BOOL", 1}},
  };
  ASSERT_EQ(std::size(expected), static_cast<size_t>(DType::kCount));
  for (const auto& [dtype, info] : expected) {
    EXPECT_EQ(dtype_name(dtype), info.first);
    EXPECT_EQ(dtype_size(dtype), info.second) << info.first;
    EXPECT_EQ(parse_dtype(info.first), dtype) << info.first;
  }
  for (int i = 0; i < static_cast<int>(DType::kCount); ++i) {
    DType d = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
}

TEST(DType, ParseRejectsUnknownSpellings) {
  for (const char* bad : {"", "f32", "FP8", "F8_E5M2", "F8E4M3", "float32", "BF16 ", "U64"}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(DType, CeilDiv) {
  EXPECT_EQ(ceil_div(0, 128), 0);
  EXPECT_EQ(ceil_div(1, 128), 1);
  EXPECT_EQ(ceil_div(128, 128), 1);
  EXPECT_EQ(ceil_div(129, 128), 2);
  EXPECT_EQ(ceil_div(300, 128), 3);
}

}  // namespace
}  // namespace dsinfer::dtype_test
