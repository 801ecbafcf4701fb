// The KV cache's blocks and the prefix index over them (src/model/kv_cache.h,
// src/engine/prefix_cache.h), without a model: reference counts, sharing without copies,
// copy-on-write of a partial block, lookups of full blocks and tails, least-recently-used
// eviction that never takes a block in use and takes leaves before their parents, the dedup
// of a block already indexed.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "model/kv_cache.h"

namespace dsinfer::prefix_cache_test {
namespace {

using Tokens = std::vector<int32_t>;

ModelConfig tiny_config() {
  ModelConfig c;
  c.n_layers = 2;
  c.kv_lora_rank = 6;
  c.qk_rope_head_dim = 2;
  return c;
}

Tokens range_tokens(int first, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Writes a recognisable entry (latent[i] = pos * 10 + i, layer-dependent) at each position.
void fill(KVCache& cache, SeqId seq, int64_t from, int64_t to, float base = 0) {
  std::vector<float> latent(6), rope(2);
  for (int l = 0; l < 2; ++l)
    for (int64_t p = from; p < to; ++p) {
      for (int i = 0; i < 6; ++i) latent[i] = base + static_cast<float>(p * 10 + i + l * 1000);
      rope[0] = rope[1] = static_cast<float>(-p);
      cache.write_entry(l, seq, p, latent.data(), rope.data());
    }
  cache.set_length(seq, to);
}

float latent0(const KVCache& cache, SeqId seq, int64_t pos, int layer = 0) {
  std::vector<float> e(8);
  cache.read_entry(layer, seq, pos, e.data());
  return e[0];
}

TEST(KVCache, SequencesAreTablesOfBlocksAndForkSharesFullBlocks) {
  KVCache cache(tiny_config(), 10 * kKVBlock);
  EXPECT_EQ(cache.total_blocks(), 10);
  const SeqId a = cache.create(150);  // 3 blocks
  EXPECT_EQ(cache.blocks(a).size(), 3u);
  EXPECT_EQ(cache.free_blocks(), 7);
  fill(cache, a, 0, 150);
  // 130 positions: two full blocks shared, 2 positions copied into a block of its own
  const SeqId b = cache.fork(a, 130, 200);
  EXPECT_EQ(cache.length(b), 130);
  EXPECT_EQ(cache.blocks(b)[0], cache.blocks(a)[0]);
  EXPECT_EQ(cache.blocks(b)[1], cache.blocks(a)[1]);
  EXPECT_NE(cache.blocks(b)[2], cache.blocks(a)[2]);
  EXPECT_EQ(cache.refs(cache.blocks(a)[0]), 2);
  EXPECT_EQ(cache.free_blocks(), 5);  // b holds 4 blocks (capacity 200), 2 of them a's
  EXPECT_EQ(latent0(cache, b, 129, 1), latent0(cache, a, 129, 1));
  // b writes its own block; a's entries there stay
  fill(cache, b, 130, 140, 0.5f);
  EXPECT_EQ(latent0(cache, a, 131), 1310.0f);
  EXPECT_EQ(latent0(cache, b, 131), 1310.5f);
  // writing a shared block is refused (it would change a's entries)
  cache.truncate(b, 10);
  EXPECT_THROW(fill(cache, b, 10, 11), Error);
  cache.release(a);
  EXPECT_EQ(cache.refs(cache.blocks(b)[0]), 1);
  cache.release(b);
  EXPECT_EQ(cache.free_blocks(), 10);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(KVCache, Bf16CacheRoundsEntriesAndHalvesTheBytes) {
  KVCache f32(tiny_config(), 64), bf16(tiny_config(), 64, KVDType::kBF16);
  EXPECT_EQ(bf16.bytes_per_position() * 2, f32.bytes_per_position());
  const SeqId s = bf16.create(3);
  std::vector<float> latent = {1.0f, 1.0078125f, 1.00390625f, -3.0f, 0.1f, 1e-3f},
                     rope = {2.0f, 5.0f};
  bf16.write_entry(0, s, 0, latent.data(), rope.data());
  std::vector<float> e(8);
  bf16.read_entry(0, s, 0, e.data());
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 1.0078125f);  // 1 + 2^-7: representable in bf16
  EXPECT_EQ(e[2], 1.0f);        // 1 + 2^-8: a tie, rounded to even
  EXPECT_EQ(e[7], 5.0f);
  EXPECT_EQ(bf16.block_entries(0, s, 0, 1).dtype, DType::kBF16);
}

TEST(KVCache, GrowAppendsBlocksAndAFullCacheRefuses) {
  KVCache cache(tiny_config(), 3 * kKVBlock);
  const SeqId a = cache.create(10);
  fill(cache, a, 0, 10);
  const BlockId first = cache.blocks(a)[0];
  EXPECT_TRUE(cache.grow(a, 190));
  EXPECT_EQ(cache.blocks(a)[0], first) << "nothing moves";
  EXPECT_EQ(latent0(cache, a, 9), 90.0f);
  EXPECT_FALSE(cache.grow(a, 200));
  EXPECT_FALSE(cache.can_reserve(1));
  EXPECT_THROW(cache.create(1), Error);
  EXPECT_THROW(parse_kv_dtype("fp16"), Error);
}

// A sequence that computed `tokens` (its entries written), its full blocks indexed under the
// root and its partial block as a tail; then released. Returns its path.
std::vector<PrefixNodeId> run_sequence(KVCache& cache, PrefixCache& prefix, const Tokens& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  PrefixCache::Match m = prefix.lookup(tokens, n - 1);
  const SeqId s = cache.create_sharing(m.blocks, m.copy_from, m.copy_positions, n);
  fill(cache, s, m.positions(), n);
  std::vector<PrefixNodeId> path = m.path;
  for (int64_t k = static_cast<int64_t>(path.size()); (k + 1) * kKVBlock <= n; ++k)
    path.push_back(
        prefix.add_block(k == 0 ? kPrefixRoot : path.back(),
                         std::span<const int32_t>(tokens).subspan(k * kKVBlock, kKVBlock), s, k));
  const int64_t first = static_cast<int64_t>(path.size()) * kKVBlock;
  prefix.touch(path);
  prefix.add_tail(path.empty() ? kPrefixRoot : path.back(),
                  std::span<const int32_t>(tokens).subspan(first), s,
                  static_cast<int64_t>(path.size()), -1, 0, -1);
  cache.release(s);
  return path;
}

TEST(PrefixCache, FindsFullBlocksAndTheBestTailAndCopiesOnlyThePartialBlock) {
  KVCache cache(tiny_config(), 20 * kKVBlock);
  PrefixCache prefix(cache, nullptr);
  Tokens a = range_tokens(0, 150);  // blocks 0, 1 full; 22 positions in a tail
  run_sequence(cache, prefix, a);
  EXPECT_EQ(prefix.nodes(), 3);
  EXPECT_EQ(cache.used_blocks(), 3);
  // the same prompt again: everything but its last position
  PrefixCache::Match m = prefix.lookup(a, 149);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.copy_positions, 21);
  EXPECT_EQ(m.positions(), 149);
  // a prompt that leaves it inside block 1: block 0 shared, 36 positions of block 1 copied
  Tokens b = range_tokens(0, 100);
  b.push_back(7);
  b.push_back(8);
  m = prefix.lookup(b, static_cast<int64_t>(b.size()) - 1);
  EXPECT_EQ(m.blocks.size(), 1u);
  EXPECT_EQ(m.copy_positions, 36);
  EXPECT_EQ(m.copy_from, prefix.lookup(a, 149).blocks[1])
      << "copied from a's block 1, matched in part";
  // another conversation: nothing in common
  m = prefix.lookup(range_tokens(5000, 80), 79);
  EXPECT_EQ(m.positions(), 0);
}

TEST(PrefixCache, ConversationsThatTakeTurnsKeepEachOthersBlocks) {
  KVCache cache(tiny_config(), 40 * kKVBlock);
  PrefixCache prefix(cache, nullptr);
  const Tokens system = range_tokens(0, 140);
  Tokens a = system, b = system;
  for (int32_t t : range_tokens(1000, 30)) a.push_back(t);
  for (int32_t t : range_tokens(2000, 50)) b.push_back(t);
  run_sequence(cache, prefix, a);
  run_sequence(cache, prefix, b);
  run_sequence(cache, prefix, range_tokens(9000, 10));  // a third, short one
  // a's next turn finds all of a's positions but the last, after b ran
  Tokens a2 = a;
  for (int32_t t : range_tokens(3000, 5)) a2.push_back(t);
  EXPECT_EQ(prefix.lookup(a2, static_cast<int64_t>(a2.size()) - 1).positions(),
            static_cast<int64_t>(a.size()));
  Tokens b2 = b;
  b2.push_back(1);
  EXPECT_EQ(prefix.lookup(b2, static_cast<int64_t>(b2.size()) - 1).positions(),
            static_cast<int64_t>(b.size()));
  // the system prompt's two full blocks are stored once; a's tail (42 positions), b's (62) and
  // the short one's (10) beside them
  EXPECT_EQ(cache.used_blocks(), 2 + 1 + 1 + 1);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesFirstAndNeverABlockInUse) {
  KVCache cache(tiny_config(), 8 * kKVBlock);
  PrefixCache prefix(cache, nullptr);
  const Tokens old_one = range_tokens(0, 200);    // 3 full blocks + a tail of 8
  const Tokens newer = range_tokens(10000, 130);  // 2 full blocks + a tail of 2
  run_sequence(cache, prefix, old_one);
  run_sequence(cache, prefix, newer);
  EXPECT_EQ(cache.free_blocks(), 8 - 4 - 3);
  // a running sequence holds the first two blocks of `newer`
  PrefixCache::Match m = prefix.lookup(newer, 128);
  ASSERT_EQ(m.blocks.size(), 2u);
  const SeqId running = cache.create_sharing(m.blocks, -1, 0, 128);
  // room for 3 blocks: the old conversation goes, deepest first (its tail, then block 2)
  ASSERT_TRUE(prefix.make_room(3));
  EXPECT_EQ(prefix.evictions(), 2);
  PrefixCache::Match old_match = prefix.lookup(old_one, 199);
  EXPECT_EQ(old_match.blocks.size(), 2u)
      << "blocks 0 and 1 were used more recently than the leaves below";
  // room for everything: only blocks in use stay
  EXPECT_FALSE(prefix.make_room(8));
  EXPECT_EQ(cache.used_blocks(), 2);
  EXPECT_EQ(prefix.lookup(newer, 128).blocks.size(), 2u);
  cache.release(running);
  EXPECT_TRUE(prefix.make_room(8));
  EXPECT_EQ(prefix.nodes(), 0);
}

TEST(PrefixCache, ABlockAlreadyIndexedReplacesTheSequencesOwnCopy) {
  KVCache cache(tiny_config(), 8 * kKVBlock);
  PrefixCache prefix(cache, nullptr);
  const Tokens t = range_tokens(0, 64);
  // two sequences computed the same block at once (admitted in the same step)
  const SeqId a = cache.create(70), b = cache.create(70);
  fill(cache, a, 0, 64);
  fill(cache, b, 0, 64);
  const PrefixNodeId na = prefix.add_block(kPrefixRoot, t, a, 0);
  const PrefixNodeId nb = prefix.add_block(kPrefixRoot, t, b, 0);
  EXPECT_EQ(na, nb);
  EXPECT_EQ(cache.blocks(a)[0], cache.blocks(b)[0]);
  EXPECT_EQ(cache.used_blocks(), 3) << "b's own copy went back";
  EXPECT_EQ(latent0(cache, b, 63), 630.0f);
}

}  // namespace
}  // namespace dsinfer::prefix_cache_test
