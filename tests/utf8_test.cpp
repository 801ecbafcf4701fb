// core/utf8.h: well-formed sequences by Table 3-7 (overlongs, surrogates and out-of-range code
// points rejected, cut-short sequences told apart from ill-formed ones), code points, and the
// prefix a stream may emit without splitting a character.
#include "core/utf8.h"

#include <gtest/gtest.h>

namespace dsinfer::utf8_test {
namespace {

size_t seq(std::string_view s, size_t* maximal = nullptr, bool* truncated = nullptr) {
  size_t m = 0;
  bool t = false;
  const size_t n = utf8_sequence(s, 0, &m, &t);
  if (maximal) *maximal = m;
  if (truncated) *truncated = t;
  return n;
}

TEST(Utf8, SequencesFollowTheUnicodeTable) {
  EXPECT_EQ(seq("a"), 1u);
  EXPECT_EQ(seq("\xC3\xA9"), 2u);          // é
  EXPECT_EQ(seq("\xE2\x82\xAC"), 3u);      // €
  EXPECT_EQ(seq("\xF0\x9F\x98\x80"), 4u);  // 😀
  size_t maximal = 0;
  bool truncated = false;
  EXPECT_EQ(seq("\xC0\x80", &maximal, &truncated), 0u);  // overlong
  EXPECT_EQ(maximal, 1u);
  EXPECT_FALSE(truncated);
  EXPECT_EQ(seq("\xED\xA0\x80", &maximal), 0u);  // a surrogate
  EXPECT_EQ(maximal, 1u);
  EXPECT_EQ(seq("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(seq("\xE2\x82", &maximal, &truncated), 0u);
  EXPECT_TRUE(truncated);
  EXPECT_EQ(maximal, 2u);
}

TEST(Utf8, CodePointsRoundTrip) {
  for (char32_t cp : {U'a', U'\u00E9', U'\u20AC', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    size_t m = 0;
    bool t = false;
    const size_t len = utf8_sequence(s, 0, &m, &t);
    ASSERT_EQ(len, s.size());
    EXPECT_EQ(utf8_code_point(s, 0, len), cp);
  }
}

TEST(Utf8, CompletePrefixHoldsBackOnlyACutShortCharacter) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("ab\xC3\xA9"), 4u);
  EXPECT_EQ(utf8_complete_prefix("ab\xC3"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
  // ill-formed bytes are not waited for: more bytes could not make them a character
  EXPECT_EQ(utf8_complete_prefix("ab\xFF"), 3u);
}

}  // namespace
}  // namespace dsinfer::utf8_test
