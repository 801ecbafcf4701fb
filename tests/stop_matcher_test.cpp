// serve/stop_matcher.h: a stop string ends the text and is never emitted, not even its first
// bytes; text that only looks like a stop string's start comes out once it is decided; a UTF-8
// character is never split.
#include "serve/stop_matcher.h"

#include <gtest/gtest.h>

namespace dsinfer::stop_matcher_test {
namespace {

std::string feed(StopMatcher& m, const std::string& text, size_t piece) {
  std::string out;
  for (size_t i = 0; i < text.size(); i += piece) out += m.push(text.substr(i, piece));
  return out + m.finish();
}

TEST(StopMatcher, EndsAtTheFirstStopStringWhateverThePieces) {
  for (size_t piece : {1, 2, 3, 100}) {
    StopMatcher m({"END", "###"});
    EXPECT_EQ(feed(m, "one two ##three END four ###", piece), "one two ##three ") << piece;
    EXPECT_TRUE(m.matched());
  }
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStillBeAStopString) {
  StopMatcher m({"stop here"});
  EXPECT_EQ(m.push("we st"), "we ");
  EXPECT_EQ(m.push("ay"), "stay");
  EXPECT_EQ(m.push(" stop"), " ");
  EXPECT_EQ(m.finish(), "stop");  // never completed: it was text
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcher, NeverSplitsACharacterAndIgnoresEmptyStops) {
  StopMatcher m({"", "zz"});
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(m.push("a" + euro.substr(0, 2)), "a");
  EXPECT_EQ(m.push(euro.substr(2)), euro);
  EXPECT_EQ(m.push("b"), "b");
  StopMatcher none({});
  EXPECT_EQ(none.push("anything"), "anything");
}

}  // namespace
}  // namespace dsinfer::stop_matcher_test
