// The engine's prefix cache at depth (labelled slow: ~30 s): at depth > 4096 (past YaRN's original
// length) a sequence's logits are the same bits whether its prefix was computed, shared from the
// cache, copied from a partial block, or recomputed after eviction, in an f32 and a bf16 cache.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine_requests.h"

namespace dsinfer::engine_depth_test {
namespace {

using namespace test;  // engine_requests.h

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// At depth 4200 (past the original 4096 positions, where YaRN's scaling applies): the rows a
// prompt's tokens are sampled from are the same bits computed whole, with 64 blocks shared and 54
// positions copied from another request's partial block, with all but one position reused, and
// after eviction took most of what was cached.
void check_depth(KVDType dtype) {
  const Tokens t = random_tokens(4200, 20);
  const Tokens q = concat(Tokens(t.begin(), t.begin() + 4150), random_tokens(10, 21));
  const Tokens other = random_tokens(4300, 22);
  SamplingParams p;
  p.max_new_tokens = 3;
  const Completion whole = fresh(t, p, /*logits=*/true, dtype);
  ASSERT_EQ(whole.tokens.size(), 3u);
  {
    KVCache cache(loaded().config, 8192, dtype);
    Engine engine(*loaded().model, cache);
    complete(engine, q, p);
    const Completion cow = complete(engine, t, p, true);
    EXPECT_EQ(cow.reused, 4150);
    EXPECT_TRUE(same_bits(cow.logits, whole.logits)) << "64 shared blocks + a copied partial one";
    const Completion again = complete(engine, t, p, true);
    EXPECT_EQ(again.reused, 4199);
    EXPECT_TRUE(same_bits(again.logits, whole.logits)) << "its own blocks";
  }
  {
    // room for 70 blocks: the other prompt (68) evicts all of q's blocks but the first two
    KVCache cache(loaded().config, 70 * kKVBlock, dtype);
    Engine engine(*loaded().model, cache);
    complete(engine, q, p);
    EXPECT_EQ(complete(engine, other, p).reused, 0);
    const Completion after = complete(engine, t, p, true);
    EXPECT_EQ(after.reused, 128);
    EXPECT_TRUE(same_bits(after.logits, whole.logits)) << "after eviction";
    EXPECT_GT(engine.prefix_cache()->evictions(), 60);
  }
}

TEST(EnginePrefix, DepthBeyond4096SameBitsSharedCopiedOrEvictedF32) { check_depth(KVDType::kF32); }
TEST(EnginePrefix, DepthBeyond4096SameBitsSharedCopiedOrEvictedBf16) {
  check_depth(KVDType::kBF16);
}

}  // namespace
}  // namespace dsinfer::engine_depth_test
