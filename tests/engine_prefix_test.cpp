// The engine with its prefix cache on a golden model (src/engine/prefix_cache.h): conversations
// that take turns keep each other's cache (A, A, B, A), interleaved users reuse their whole
// history and store a shared system prompt once, an overfull load waits and loses nothing.
// tests/engine_depth_test.cpp holds the bitwise checks at depth > 4096.
#include <gtest/gtest.h>

#include <vector>

#include "engine_requests.h"

namespace dsinfer::engine_prefix_test {
namespace {

using namespace test;  // engine_requests.h

// Two one-turn chats sent A, A, B, A: the fourth finds A's blocks again (the old engine took the
// longest-prefix retained sequence over and truncated it, so B destroyed A's cache).
TEST(EnginePrefix, ConversationsThatTakeTurnsKeepEachOthersCache) {
  const Tokens a = random_tokens(100, 1), b = random_tokens(100, 2);
  SamplingParams p;
  p.max_new_tokens = 4;
  KVCache cache(loaded().config, 4096);
  Engine engine(*loaded().model, cache);
  const Completion a1 = complete(engine, a, p), a2 = complete(engine, a, p),
                   b1 = complete(engine, b, p), a3 = complete(engine, a, p);
  EXPECT_EQ(a1.reused, 0);
  EXPECT_EQ(a2.reused, 99);  // all but the last prompt position, whose logits are needed
  EXPECT_EQ(b1.reused, 0);
  EXPECT_EQ(a3.reused, 99);
  EXPECT_EQ(a2.tokens, a1.tokens);
  EXPECT_EQ(a3.tokens, a1.tokens);
  EXPECT_EQ(b1.tokens, fresh(b, p).tokens);
}

// 8 users x 4 turns, a shared 300-token system prompt, the users' turns interleaved in one batch:
// every turn after a user's first reuses its whole previous prompt and answer (all but the
// answer's last token, which was never fed), and the tokens are those of a fresh run. At the end
// the system prompt's 4 full blocks are stored once: the cache holds exactly 4 blocks plus each
// conversation's own.
TEST(EnginePrefix, InterleavedUsersReuseTheirHistoryAndStoreTheSystemPromptOnce) {
  constexpr int kUsers = 8, kTurns = 4;
  const Tokens system = random_tokens(300, 10);
  KVCache cache(loaded().config, 16384);
  EngineOptions o;
  o.step_tokens = 96;  // prefill in chunks, between the others' decodes
  Engine engine(*loaded().model, cache, o);
  std::vector<Tokens> history(kUsers, system);  // what each user's next prompt starts with
  std::vector<int64_t> cached(kUsers, 0);       // positions its last turn left in the cache
  for (int turn = 0; turn < kTurns; ++turn) {
    std::vector<Tokens> prompts(kUsers), got(kUsers);
    std::vector<int64_t> reused(kUsers, -1);
    std::vector<SamplingParams> params(kUsers);
    for (int u = 0; u < kUsers; ++u) {
      prompts[u] = concat(history[u], random_tokens(20 + u, 100 * turn + u));
      params[u].max_new_tokens = 5 + u % 3;
      params[u].temperature = 0.8f;
      params[u].seed = static_cast<uint64_t>(1000 * turn + u);
      RequestEvents e;
      e.on_token = [&got, u](int32_t t) { got[u].push_back(t); };
      e.on_start = [&reused, u](int64_t r) { reused[u] = r; };
      engine.submit(prompts[u], params[u], std::move(e));
    }
    engine.run_until_idle();
    for (int u = 0; u < kUsers; ++u) {
      SCOPED_TRACE(testing::Message() << "user " << u << " turn " << turn);
      if (turn > 0) {
        EXPECT_EQ(reused[u], cached[u]);
      }
      EXPECT_EQ(got[u], fresh(prompts[u], params[u]).tokens);
      history[u] = concat(prompts[u], got[u]);
      cached[u] = static_cast<int64_t>(history[u].size()) - 1;
    }
  }
  int64_t own_blocks = 0;
  for (int u = 0; u < kUsers; ++u) own_blocks += KVCache::blocks_for(cached[u]) - 4;
  EXPECT_EQ(cache.used_blocks(), 4 + own_blocks);
  EXPECT_EQ(cache.n_sequences(), 0);
}

// A load that overfills the cache: requests wait for room (cached blocks are evicted first) and
// all finish with their own tokens; nothing is lost.
TEST(EnginePrefix, AnOverfullLoadWaitsAndLosesNothing) {
  KVCache cache(loaded().config, 6 * kKVBlock);
  Engine engine(*loaded().model, cache);
  SamplingParams p;
  p.max_new_tokens = 6;
  std::vector<Tokens> prompts, got(6);
  std::vector<FinishReason> reasons(6, FinishReason::kError);
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(random_tokens(100 + 10 * i, 30 + i));  // 2-3 blocks each: 2-3 fit at once
    RequestEvents e;
    e.on_token = [&got, i](int32_t t) { got[i].push_back(t); };
    e.on_finish = [&reasons, i](FinishReason r, const std::string&) { reasons[i] = r; };
    engine.submit(prompts[i], p, std::move(e));
  }
  engine.run_until_idle();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(reasons[i], FinishReason::kLength) << i;
    EXPECT_EQ(got[i], fresh(prompts[i], p).tokens) << i;
  }
  EXPECT_LE(cache.used_blocks(), 6);
}

}  // namespace
}  // namespace dsinfer::engine_prefix_test
