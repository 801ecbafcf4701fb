// The engine's prefix cache at depth (labelled slow: ~30 s): at depth > 4096 (past YaRN's original
// length) a sequence's logits are the same bits whether its prefix was computed, shared from the
// cache, copied from a partial block, or recomputed after eviction, in an f32 and a bf16 cache.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer {
namespace {

using Tokens = std::vector<int32_t>;

struct Loaded {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool{2};
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  Loaded() {
    const std::string ckpt = test::convert_golden("tiny-v3");
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *comm, pool);
  }
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

Tokens random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Tokens t(static_cast<size_t>(n));
  for (int32_t& v : t) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(loaded().config.vocab_size));
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Completion {
  Tokens tokens;
  int64_t reused = -1;
  std::vector<float> logits;  // the rows its tokens were sampled from, [tokens, vocab]
};

// Runs one request to the end on `engine`.
Completion complete(Engine& engine, const Tokens& prompt, SamplingParams p, bool logits = false) {
  Completion c;
  p.token_logits = logits;
  const int64_t vocab = loaded().config.vocab_size;
  RequestEvents e;
  e.on_token = [&](int32_t t) { c.tokens.push_back(t); };
  e.on_start = [&](int64_t reused) { c.reused = reused; };
  if (logits) e.on_logits = [&](int64_t, const float* row) { c.logits.insert(c.logits.end(), row, row + vocab); };
  engine.submit(prompt, p, std::move(e));
  engine.run_until_idle();
  return c;
}

// The same request alone on a fresh engine without prefix reuse.
Completion fresh(const Tokens& prompt, const SamplingParams& p, bool logits = false, KVDType dtype = KVDType::kF32) {
  KVCache cache(loaded().config, static_cast<int64_t>(prompt.size()) + p.max_new_tokens, dtype);
  EngineOptions o;
  o.prefix_cache = false;
  Engine engine(*loaded().model, cache, o);
  return complete(engine, prompt, p, logits);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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
TEST(EnginePrefix, DepthBeyond4096SameBitsSharedCopiedOrEvictedBf16) { check_depth(KVDType::kBF16); }

}  // namespace
}  // namespace dsinfer
