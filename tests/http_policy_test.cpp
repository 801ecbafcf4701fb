// serve/http_policy.h: the bearer check (any case of the scheme, nothing but the exact key), the
// CORS origin an answer names, and the per-launch id prefix.
#include "serve/http_policy.h"

#include <gtest/gtest.h>

namespace dsinfer::http_policy_test {
namespace {

TEST(HttpPolicy, TheBearerSchemeInAnyCaseAndOnlyTheExactKey) {
  EXPECT_TRUE(authorized_by("Bearer sekrit", "sekrit"));
  EXPECT_TRUE(authorized_by("bearer sekrit", "sekrit"));
  EXPECT_TRUE(authorized_by("BEARER sekrit", "sekrit"));
  EXPECT_FALSE(authorized_by("Bearer sekri", "sekrit"));
  EXPECT_FALSE(authorized_by("Bearer sekrit2", "sekrit"));
  EXPECT_FALSE(authorized_by("Basic sekrit", "sekrit"));
  EXPECT_FALSE(authorized_by("sekrit", "sekrit"));
  EXPECT_FALSE(authorized_by("", "sekrit"));
  EXPECT_FALSE(authorized_by("Bearer ", "sekrit"));
  EXPECT_TRUE(authorized_by("", ""));  // no key configured
  EXPECT_TRUE(authorized_by("Bearer anything", ""));
}

TEST(HttpPolicy, AllowedOrigins) {
  EXPECT_EQ(allowed_origin({"*"}, "https://a.example"), "*");
  EXPECT_EQ(allowed_origin({"*"}, ""), "*");
  EXPECT_EQ(allowed_origin({"https://a.example"}, "https://a.example"), "https://a.example");
  EXPECT_EQ(allowed_origin({"https://a.example"}, "https://b.example"), "");
  EXPECT_EQ(allowed_origin({"https://a.example"}, ""), "");
  EXPECT_EQ(allowed_origin({}, "https://a.example"), "");
}

TEST(HttpPolicy, LaunchIdsAreEightHexDigitsAndDiffer) {
  const std::string a = launch_id(), b = launch_id();
  EXPECT_EQ(a.size(), 8u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);  // (2^-32 of the time they would not)
}

}  // namespace
}  // namespace dsinfer::http_policy_test
