// The gloo all_reduce algorithm names and `auto`'s choice (the algorithms themselves run between
// processes in bench_comm_test.cpp).
#include "comm/gloo_allreduce.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dsinfer::gloo_allreduce_test {
namespace {

TEST(GlooAllreduce, NamesRoundTrip) {
  for (GlooAllreduce a : {GlooAllreduce::kAuto, GlooAllreduce::kRing, GlooAllreduce::kBcube,
                          GlooAllreduce::kHalvingDoubling, GlooAllreduce::kRingChunked})
    EXPECT_EQ(parse_gloo_allreduce(gloo_allreduce_name(a)), a);
}

TEST(GlooAllreduce, UnknownNameIsNamed) {
  try {
    parse_gloo_allreduce("Ring");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DSINFER_GLOO_ALLREDUCE=Ring is not one of"),
              std::string::npos)
        << e.what();
  }
}

TEST(GlooAllreduce, AutoPicksARealAlgorithmForEveryLength) {
  for (int world : {2, 3, 4, 16})
    for (int64_t n : {int64_t{1}, int64_t{7168}, kRegisteredMaxFloats, kRegisteredMaxFloats + 1,
                      int64_t{1} << 24}) {
      const GlooAllreduce a = auto_gloo_allreduce(n, world);
      EXPECT_NE(a, GlooAllreduce::kAuto) << n << " floats at " << world;
      // registered objects are made per power-of-two bucket and padded to it: only small lengths
      // may use them (a 512-token prefill's would hold twice its 14.7 MB)
      if (n > kRegisteredMaxFloats) {
        EXPECT_TRUE(a == GlooAllreduce::kRing || a == GlooAllreduce::kBcube)
            << n << " floats at " << world;
      }
    }
}

}  // namespace
}  // namespace dsinfer::gloo_allreduce_test
