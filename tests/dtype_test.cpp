#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"

namespace dsinfer {
namespace {

TEST(DType, Fp8TableMatchesFieldDecodeForAll256Codes) {
  for (int code = 0; code < 256; ++code) {
    float slow = fp8_e4m3_to_f32_slow(static_cast<uint8_t>(code));
    float fast = fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    if (std::isnan(slow)) {
      EXPECT_TRUE(std::isnan(fast)) << code;
    } else {
      EXPECT_EQ(slow, fast) << code;
    }
  }
}

}  // namespace
}  // namespace dsinfer
