// Attention has two implementations (attention.cpp): per query for decode, as matrix products
// for prefill (8 or more queries per call). Whatever way a sequence is cut into forward calls,
// the last position's logits must be the same bits: all at once (matrix path from position 0), one
// token at a time after a short prompt (per-query path), and two long chunks (matrix path with
// a cache already holding keys, over several query blocks). The goldens' prefills are shorter than
// 8 tokens, so without this test the matrix path would be checked only through the chat
// transcripts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/fast_decode_attention.h"
#include "kernels/linear.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::attention_paths_test {
namespace {

class AttentionPaths : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionPaths, EveryCutOfTheSequenceGivesTheSameLogits) {
  const std::string ckpt = test::convert_golden(GetParam());
  auto comm = make_local_comm();
  ThreadPool pool(2);
  const ModelConfig config = load_config(ckpt + "/config.json");
  auto model = Transformer::load(config, ckpt, *comm, pool);

  constexpr int kBatch = 2, kLen = 150;  // several blocks of 64 queries
  std::vector<int32_t> tokens(kBatch * kLen);
  std::mt19937 rng(7);
  for (int32_t& t : tokens)
    t = static_cast<int32_t>(rng() % static_cast<uint32_t>(config.vocab_size));
  const int64_t vocab = config.vocab_size;

  // Runs the sequence as forward calls of the given lengths; returns the last logits [batch,
  // vocab].
  auto run = [&](const std::vector<int>& cuts, KVDType dtype = KVDType::kF32) {
    KVCache cache(config, kBatch, kLen, dtype);
    std::vector<float> logits(kBatch * vocab);
    int pos = 0;
    for (int len : cuts) {
      std::vector<int32_t> chunk(kBatch * len);
      for (int b = 0; b < kBatch; ++b)
        std::copy_n(tokens.data() + b * kLen + pos, len, chunk.data() + b * len);
      model->forward(chunk.data(), kBatch, len, pos, cache, logits.data());
      pos += len;
    }
    EXPECT_EQ(pos, kLen);
    return logits;
  };
  const std::vector<float> whole = run({kLen});
  std::vector<int> steps = {4};
  while (static_cast<int>(steps.size()) < kLen - 3) steps.push_back(1);
  const std::vector<float> stepwise = run(steps);
  const std::vector<float> chunks = run({70, 80});

  for (int b = 0; b < kBatch; ++b) {
    const float* ref = whole.data() + b * vocab;
    float max_ref = 0;
    for (int64_t v = 0; v < vocab; ++v) max_ref = std::max(max_ref, std::fabs(ref[v]));
    ASSERT_GT(max_ref, 0);
    // bit for bit (batch invariance: both paths reduce every product in the canonical order)
    for (const auto* other : {&stepwise, &chunks})
      EXPECT_EQ(std::memcmp(other->data() + b * vocab, ref, vocab * sizeof(float)), 0)
          << "row " << b << (other == &stepwise ? " stepwise" : " chunks");
  }
}

// Fast mode's prefill takes its own path where bf16 kernels run (attend_as_bf16_matrices: the
// cache as bf16 weights of both products), and so does its decode on AMX (amx_decode_attention).
// Over several query blocks, whole, in two chunks and a token at a time, its last logits must
// stay within bf16 rounding of exact mode's, with the same argmax.
TEST_P(AttentionPaths, FastModeStaysWithinRoundingOfExactMode) {
  const std::string ckpt = test::convert_golden(GetParam());
  auto comm = make_local_comm();
  ThreadPool pool(2);
  const ModelConfig config = load_config(ckpt + "/config.json");
  auto model = Transformer::load(config, ckpt, *comm, pool);
  constexpr int kBatch = 2, kLen = 150;
  std::vector<int32_t> tokens(kBatch * kLen);
  std::mt19937 rng(11);
  for (int32_t& t : tokens)
    t = static_cast<int32_t>(rng() % static_cast<uint32_t>(config.vocab_size));
  const int64_t vocab = config.vocab_size;
  auto run = [&](const std::vector<int>& cuts, KVDType dtype = KVDType::kF32) {
    KVCache cache(config, kBatch, kLen, dtype);
    std::vector<float> logits(kBatch * vocab);
    int pos = 0;
    for (int len : cuts) {
      std::vector<int32_t> chunk(kBatch * len);
      for (int b = 0; b < kBatch; ++b)
        std::copy_n(tokens.data() + b * kLen + pos, len, chunk.data() + b * len);
      model->forward(chunk.data(), kBatch, len, pos, cache, logits.data());
      pos += len;
    }
    return logits;
  };
  const std::vector<float> exact = run({kLen});
  KernelConfig fast = model->kernels();
  fast.act = ActDType::kBF16;
  model->set_kernels(fast);
  const std::vector<float> fast_whole = run({kLen}), fast_chunks = run({70, 80});
  // and decode's path (on AMX amx_decode_attention: both products on the tiles)
  std::vector<int> steps = {4};
  while (static_cast<int>(steps.size()) < kLen - 3) steps.push_back(1);
  const std::vector<float> fast_steps = run(steps);
  // where fast mode's bf16 kernels run, every path rounds the cached entries to bf16 before using
  // them: a bf16 cache gives the same bits
  if (fast.fast_kernels() != FastModeKernels::kExact) {
    EXPECT_EQ(run({kLen}, KVDType::kBF16), fast_whole) << "prefill from a bf16 cache";
    EXPECT_EQ(run({70, 80}, KVDType::kBF16), fast_chunks) << "chunks from a bf16 cache";
    EXPECT_EQ(run(steps, KVDType::kBF16), fast_steps) << "decode from a bf16 cache";
  }
  for (int b = 0; b < kBatch; ++b) {
    const float* ref = exact.data() + b * vocab;
    const float max_ref = *std::max_element(
        ref, ref + vocab, [](float x, float y) { return std::fabs(x) < std::fabs(y); });
    for (const auto* fast : {&fast_whole, &fast_chunks, &fast_steps}) {
      const float* got = fast->data() + b * vocab;
      float max_d = 0;
      for (int64_t v = 0; v < vocab; ++v) max_d = std::max(max_d, std::fabs(got[v] - ref[v]));
      const double ratio = max_d / std::fabs(max_ref);
      std::printf("[ fast ] %s row %d %s: max|d|/max|ref| %.3g\n", GetParam().c_str(), b,
                  fast == &fast_whole    ? "whole"
                  : fast == &fast_chunks ? "chunks"
                                         : "steps",
                  ratio);
      EXPECT_GT(ratio, 0) << "fast mode gave exact mode's bits: were the activations rounded?";
      EXPECT_LT(ratio, 0.05) << "row " << b;
      EXPECT_EQ(std::max_element(got, got + vocab) - got, std::max_element(ref, ref + vocab) - ref)
          << "row " << b;
    }
  }
}

// Fast mode's decode attention splits a sequence's positions into segments of kDecodeSplitKeys
// that run on different threads and are merged in position order: at two segments, a decode's
// logits must be the same bits at 1, 2 and 3 threads (other items per thread), alone and beside
// another sequence of the same depth. (tiny-v3 only: ~4 s a model.)
TEST(FastDecodeSplit, SameBitsAtAnyThreadCountAndBatch) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  auto comm = make_local_comm();
  const ModelConfig config = load_config(ckpt + "/config.json");
  constexpr int kBatch = 2, kPrompt = kDecodeSplitKeys + 100, kSteps = 3;
  std::vector<int32_t> tokens(kBatch * (kPrompt + kSteps));
  std::mt19937 rng(13);
  for (int32_t& t : tokens)
    t = static_cast<int32_t>(rng() % static_cast<uint32_t>(config.vocab_size));
  const int64_t vocab = config.vocab_size;
  const int64_t len = kPrompt + kSteps;
  // the prompt of `batch` sequences as one prefill, then kSteps decodes: the decodes' logits
  // [kSteps, batch, vocab]
  auto run = [&](int threads, int batch) {
    ThreadPool pool(threads);
    auto model = Transformer::load(config, ckpt, *comm, pool);
    KernelConfig fast = model->kernels();
    fast.act = ActDType::kBF16;
    model->set_kernels(fast);
    KVCache cache(config, batch, len, KVDType::kBF16);
    std::vector<float> logits(batch * vocab), decoded;
    std::vector<int32_t> chunk(batch * kPrompt);
    for (int b = 0; b < batch; ++b)
      std::copy_n(tokens.data() + b * len, kPrompt, chunk.data() + b * kPrompt);
    model->forward(chunk.data(), batch, kPrompt, 0, cache, logits.data());
    for (int s = 0; s < kSteps; ++s) {
      for (int b = 0; b < batch; ++b) chunk[b] = tokens[b * len + kPrompt + s];
      model->forward(chunk.data(), batch, 1, kPrompt + s, cache, logits.data());
      decoded.insert(decoded.end(), logits.begin(), logits.end());
    }
    return std::pair(decoded, model->kernels().fast_kernels());
  };
  const auto [two, kernels] = run(2, kBatch);
  if (kernels == FastModeKernels::kExact)
    GTEST_SKIP() << "fast mode's bf16 decode kernels do not run on this CPU";
  EXPECT_EQ(run(1, kBatch).first, two) << "1 thread";
  EXPECT_EQ(run(3, kBatch).first, two) << "3 threads";
  const std::vector<float> alone = run(2, 1).first;
  for (int s = 0; s < kSteps; ++s)
    EXPECT_EQ(std::memcmp(alone.data() + s * vocab, two.data() + s * kBatch * vocab,
                          vocab * sizeof(float)),
              0)
        << "decode " << s << " alone";
}

INSTANTIATE_TEST_SUITE_P(Models, AttentionPaths,
                         ::testing::Values("tiny-v3", "tiny-v2", "tiny-v2-lite"),
                         test::model_test_name);

}  // namespace
}  // namespace dsinfer::attention_paths_test
