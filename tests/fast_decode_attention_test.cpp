// fast mode's decode attention kernels (kernels/fast_decode_attention.h: AMX tiles, VDPBF16PS)
// against a double-precision softmax(q E^T) L:
// within bf16 rounding for every shape the model meets (heads not a multiple of 16, entries not a
// multiple of 32, a last block of 1..64 keys, several online-softmax chunks), the same bits for a
// head whatever heads share its call (the thread split), and the same bits from an f32 cache as
// from its bf16 rounding, and the position split's segments computed apart merge to the whole
// call's bits. Each kernel is skipped on CPUs that lack it.
#include "kernels/fast_decode_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/matmul_amx.h"

namespace dsinfer::fast_decode_attention_test {
namespace {

struct Kernel {
  const char* name;
  void (*attend)(ConstMatView, const CachedBlocks&, float, MatView);
  bool (*usable)();
};

void PrintTo(const Kernel& kernel, std::ostream* os) { *os << kernel.name; }

bool avx512_bf16() { return cpu_supports(Isa::kAvx512); }

class FastDecodeAttention : public testing::TestWithParam<Kernel> {
 protected:
  void SetUp() override {
    if (!GetParam().usable()) GTEST_SKIP() << GetParam().name << " does not run on this CPU";
  }
};

struct Case {
  int64_t heads, entry_dim, lora, n_keys;
};

struct Cache {
  std::vector<float> f32;      // [n_keys, entry_dim]
  std::vector<uint16_t> bf16;  // the same values rounded
  std::vector<WeightMatrix> f32_blocks, bf16_blocks;
};

Cache make_cache(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Cache cache;
  cache.f32.resize(static_cast<size_t>(c.n_keys * c.entry_dim));
  for (float& v : cache.f32) v = normal(rng);
  for (float v : cache.f32) cache.bf16.push_back(f32_to_bf16(v));
  for (int64_t k = 0; k < c.n_keys; k += kAttentionBlockKeys) {
    const int64_t rows = std::min(kAttentionBlockKeys, c.n_keys - k);
    cache.f32_blocks.push_back(
        {DType::kF32, rows, c.entry_dim,
         reinterpret_cast<const uint8_t*>(cache.f32.data() + k * c.entry_dim), nullptr});
    cache.bf16_blocks.push_back(
        {DType::kBF16, rows, c.entry_dim,
         reinterpret_cast<const uint8_t*>(cache.bf16.data() + k * c.entry_dim), nullptr});
  }
  return cache;
}

std::vector<float> attend(const Kernel& kernel, const std::vector<float>& q, const Case& c,
                          const std::vector<WeightMatrix>& blocks, int64_t first_head,
                          int64_t heads) {
  std::vector<float> out(static_cast<size_t>(heads * c.lora));
  kernel.attend(ConstMatView(q.data() + first_head * c.entry_dim, heads, c.entry_dim),
                CachedBlocks{blocks, c.n_keys}, 0.1f, MatView(out.data(), heads, c.lora));
  return out;
}

TEST_P(FastDecodeAttention, MatchesADoubleReferenceWithinBf16Rounding) {
  const Case cases[] = {{64, 576, 512, 1},   {64, 576, 512, 63},  {64, 576, 512, 64},
                        {64, 576, 512, 65},  {17, 576, 512, 300}, {5, 48, 32, 1000},
                        {40, 96, 64, 2049},  {1, 576, 512, 257},  {33, 80, 40, 129},
                        {16, 576, 512, 4097}};
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "heads " << c.heads << " entry " << c.entry_dim << " lora "
                                    << c.lora << " keys " << c.n_keys);
    const Cache cache = make_cache(c, rng);
    std::normal_distribution<float> normal(0.0f, 3.0f);  // peaked softmaxes as well as flat ones
    std::vector<float> q(static_cast<size_t>(c.heads * c.entry_dim));
    for (float& v : q) v = normal(rng);
    const std::vector<float> got = attend(GetParam(), q, c, cache.bf16_blocks, 0, c.heads);
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<double> p(static_cast<size_t>(c.n_keys));
      double max_s = -1e300, sum = 0;
      for (int64_t k = 0; k < c.n_keys; ++k) {
        double s = 0;
        for (int64_t i = 0; i < c.entry_dim; ++i)
          s += double(q[h * c.entry_dim + i]) * cache.f32[k * c.entry_dim + i];
        p[k] = 0.1 * s;
        max_s = std::max(max_s, p[k]);
      }
      for (double& v : p) sum += (v = std::exp(v - max_s));
      double max_ref = 0, max_d = 0;
      for (int64_t col = 0; col < c.lora; ++col) {
        double ref = 0;
        for (int64_t k = 0; k < c.n_keys; ++k) ref += p[k] / sum * cache.f32[k * c.entry_dim + col];
        max_ref = std::max(max_ref, std::fabs(ref));
        max_d = std::max(max_d, std::fabs(ref - got[h * c.lora + col]));
      }
      // bf16 operands (8 bits) in both products; the entries are unit normals, so a row's
      // largest output is O(1) and the error O(2^-8) of it
      EXPECT_LT(max_d, 0.03 * std::max(max_ref, 0.1)) << "head " << h;
    }
  }
}

TEST_P(FastDecodeAttention, AHeadsBitsDoNotDependOnTheHeadsBesideIt) {
  const Case c{48, 576, 512, 700};
  std::mt19937 rng(5);
  const Cache cache = make_cache(c, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(c.heads * c.entry_dim));
  for (float& v : q) v = normal(rng);
  const std::vector<float> all = attend(GetParam(), q, c, cache.bf16_blocks, 0, c.heads);
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 16}, {16, 7}, {23, 25}, {47, 1}}) {
    const std::vector<float> part = attend(GetParam(), q, c, cache.bf16_blocks, first, count);
    EXPECT_EQ(std::memcmp(part.data(), all.data() + first * c.lora, part.size() * sizeof(float)), 0)
        << "heads [" << first << ", " << first + count << ")";
  }
  // an f32 cache is rounded to bf16 on the way in: the same bits as the bf16 cache
  const std::vector<float> from_f32 = attend(GetParam(), q, c, cache.f32_blocks, 0, c.heads);
  EXPECT_EQ(std::memcmp(from_f32.data(), all.data(), all.size() * sizeof(float)), 0);
}

// The position split: segment states computed on their own (in reverse order, for a subset of
// heads, as attend_per_query_split's items may run) and merged give the whole call's bits.
TEST_P(FastDecodeAttention, SegmentsComputedApartMergeToTheWholeCallsBits) {
  const Case c{40, 576, 512, 3 * kDecodeSplitKeys + 77};
  std::mt19937 rng(7);
  const Cache cache = make_cache(c, rng);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> q(static_cast<size_t>(c.heads * c.entry_dim));
  for (float& v : q) v = normal(rng);
  const std::vector<float> all = attend(GetParam(), q, c, cache.bf16_blocks, 0, c.heads);
  const DecodeSegmentKernel segment =
      std::string(GetParam().name) == "amx" ? amx_decode_segment : bf16dot_decode_segment;
  const CachedBlocks keys{cache.bf16_blocks, c.n_keys};
  const int64_t n_segments = decode_segments(c.n_keys);
  ASSERT_EQ(n_segments, 4);
  const int64_t first = 16, heads = 17;  // heads [16, 33)
  std::vector<float> o(static_cast<size_t>(n_segments * heads * c.lora)),
      max(static_cast<size_t>(n_segments * heads)), sum(max.size());
  std::vector<DecodeSegmentState> states;
  for (int64_t s = 0; s < n_segments; ++s)
    states.push_back({MatView(o.data() + s * heads * c.lora, heads, c.lora), max.data() + s * heads,
                      sum.data() + s * heads});
  for (int64_t s = n_segments - 1; s >= 0; --s)
    segment(ConstMatView(q.data() + first * c.entry_dim, heads, c.entry_dim),
            decode_segment(keys, s), 0.1f, states[static_cast<size_t>(s)]);
  std::vector<float> merged(static_cast<size_t>(heads * c.lora));
  merge_decode_segments(states, 0.1f, MatView(merged.data(), heads, c.lora));
  EXPECT_EQ(std::memcmp(merged.data(), all.data() + first * c.lora, merged.size() * sizeof(float)),
            0);
  // a segment's keys start at its fixed position, whatever the call
  EXPECT_EQ(decode_segment(keys, 3).n_keys, 77);
  EXPECT_EQ(decode_segment(keys, 3).blocks.size(), 2u);
  EXPECT_EQ(decode_segment(keys, 1).blocks.data(),
            cache.bf16_blocks.data() + kDecodeSplitKeys / kAttentionBlockKeys);
  EXPECT_ANY_THROW(decode_segment(keys, 4));
}

TEST_P(FastDecodeAttention, RefusesBlocksThatDoNotCoverTheKeys) {
  const Case c{16, 64, 32, 100};
  std::mt19937 rng(9);
  const Cache cache = make_cache(c, rng);
  std::vector<float> q(static_cast<size_t>(c.heads * c.entry_dim), 1.0f);
  std::vector<float> out(static_cast<size_t>(c.heads * c.lora));
  const std::vector<WeightMatrix> one_block(cache.bf16_blocks.begin(),
                                            cache.bf16_blocks.begin() + 1);
  EXPECT_ANY_THROW(GetParam().attend(ConstMatView(q.data(), c.heads, c.entry_dim),
                                     CachedBlocks{one_block, c.n_keys}, 0.1f,
                                     MatView(out.data(), c.heads, c.lora)));
}

INSTANTIATE_TEST_SUITE_P(Kernels, FastDecodeAttention,
                         testing::Values(Kernel{"amx", amx_decode_attention, amx_usable},
                                         Kernel{"bf16dot", bf16dot_decode_attention, avx512_bf16}),
                         [](const testing::TestParamInfo<Kernel>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace dsinfer::fast_decode_attention_test
