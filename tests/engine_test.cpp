// The engine of sequences (src/engine/engine.h, src/model/step.h, src/model/kv_cache.h) on a
// golden model: a sequence's logits are the same bits whatever else is in the step, however its
// prompt is cut, after truncate or fork, at 1, 2 and 3 threads; the engine's tokens (greedy and
// sampled) do not depend on batch mates or arrival times; a full cache makes requests wait, a
// request that can never fit fails clearly; cancel frees the cache; prefix reuse changes nothing.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::engine_test {
namespace {

using Tokens = std::vector<int32_t>;

struct Loaded {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool;
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  explicit Loaded(int threads) : pool(threads) {
    const std::string ckpt = test::convert_golden("tiny-v3");
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *comm, pool);
  }
};

Loaded& loaded(int threads = 2) {
  static std::map<int, std::unique_ptr<Loaded>> models;
  auto& m = models[threads];
  if (!m) m = std::make_unique<Loaded>(threads);
  return *m;
}

Tokens random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  Tokens t(static_cast<size_t>(n));
  for (int32_t& v : t) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// The logits of every position of `tokens` [n, vocab] run as one sequence, its prompt cut at
// `cuts`.
std::vector<float> logits_by_cuts(Transformer& m, const Tokens& tokens,
                                  const std::vector<int>& cuts) {
  KVCache cache(m.config(), 1024);
  const SeqId seq = cache.create(static_cast<int64_t>(tokens.size()));
  std::vector<float> all;
  int pos = 0;
  for (int len : cuts) {
    Step step;
    step.add(seq, pos, tokens.data() + pos, len, /*all_logits=*/true);
    StepOutput out;
    m.forward(step, cache, out);
    all.insert(all.end(), out.logits.begin(), out.logits.end());
    pos += len;
  }
  EXPECT_EQ(pos, static_cast<int>(tokens.size()));
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Engine, ChunkedPrefillGivesTheLogitsOfOneWholePrefillAtAnyThreadCount) {
  const Tokens tokens = random_tokens(150, loaded().config.vocab_size, 1);
  const std::vector<float> whole = logits_by_cuts(*loaded(1).model, tokens, {150});
  for (int threads : {1, 2, 3}) {
    Transformer& m = *loaded(threads).model;
    for (const std::vector<int>& cuts :
         std::vector<std::vector<int>>{{150}, {1, 149}, {7, 8, 60, 75}, {64, 64, 22}}) {
      std::vector<int> steps = cuts;
      EXPECT_TRUE(same_bits(logits_by_cuts(m, tokens, steps), whole))
          << threads << " threads, " << cuts.size() << " cuts";
    }
  }
  // one token at a time after a short prompt (the decode path all along)
  std::vector<int> stepwise = {3};
  while (stepwise.size() < 148) stepwise.push_back(1);
  EXPECT_TRUE(same_bits(logits_by_cuts(*loaded(2).model, tokens, stepwise), whole));
}

TEST(Engine, ASequencesLogitsDoNotDependOnItsBatchMates) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  const Tokens a = random_tokens(40, vocab, 2), b = random_tokens(90, vocab, 3),
               c = random_tokens(5, vocab, 4);
  const std::vector<float> alone = logits_by_cuts(m, a, {30, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  // the same cuts of `a`, but every step shares the forward call with others' prefill and decode
  KVCache cache(m.config(), 4096);
  const SeqId sa = cache.create(40), sb = cache.create(90), sc = cache.create(5);
  std::vector<float> mixed;
  int pos_a = 0, pos_b = 0, pos_c = 0;
  const std::vector<int> cuts_a = {30, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (size_t s = 0; s < cuts_a.size(); ++s) {
    Step step;
    // c decodes one token at a time, after a, or every fourth step first: then b's prefill chunk
    // lies between c's and a's decode rows, which attention gathers for one per-query pass
    auto add_c = [&] {
      if (pos_c < 5) {
        step.add(sc, pos_c, c.data() + pos_c, 1);
        ++pos_c;
      }
    };
    const bool c_first = s % 4 == 0;
    if (c_first) add_c();
    if (s % 2 == 0 && pos_b < 90) {  // b's prefill in chunks of 20, before a
      const int n = std::min(20, 90 - pos_b);
      step.add(sb, pos_b, b.data() + pos_b, n);
      pos_b += n;
    }
    step.add(sa, pos_a, a.data() + pos_a, cuts_a[s], /*all_logits=*/true);
    pos_a += cuts_a[s];
    if (!c_first) add_c();
    StepOutput out;
    m.forward(step, cache, out);
    int64_t first_row = 0;  // a's first row of logits: one row for each chunk before it
    for (const SeqChunk& chunk : step.chunks) {
      if (chunk.seq == sa) break;
      first_row += chunk.all_logits ? chunk.n_tokens : 1;
    }
    mixed.insert(mixed.end(), out.logits.begin() + first_row * vocab,
                 out.logits.begin() + (first_row + cuts_a[s]) * vocab);
  }
  EXPECT_TRUE(same_bits(mixed, alone));
}

TEST(Engine, TruncateAndForkGiveTheLogitsOfOneWholePrefill) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  const Tokens tokens = random_tokens(60, vocab, 5);
  const std::vector<float> whole = logits_by_cuts(m, tokens, {60});
  KVCache cache(m.config(), 1024);
  // truncate: prefill a wrong continuation, roll it back, then the right one
  const SeqId seq = cache.create(80);
  Tokens wrong = tokens;
  for (int i = 40; i < 60; ++i) wrong[i] = (wrong[i] + 1) % vocab;
  Step first;
  first.add(seq, 0, wrong.data(), 60);
  StepOutput out;
  m.forward(first, cache, out);
  cache.truncate(seq, 40);
  Step rest;
  rest.add(seq, 40, tokens.data() + 40, 20, true);
  m.forward(rest, cache, out);
  const std::vector<float> tail(whole.end() - 20 * vocab, whole.end());
  EXPECT_TRUE(same_bits(out.logits, tail));
  // fork: a second sequence shares the first 40 positions and prefills only the rest
  const SeqId child = cache.fork(seq, 40, 60);
  Step forked;
  forked.add(child, 40, tokens.data() + 40, 20, true);
  m.forward(forked, cache, out);
  EXPECT_TRUE(same_bits(out.logits, tail));
}

TEST(Engine, AMalformedStepIsAnErrorBeforeAnythingRuns) {
  Transformer& m = *loaded().model;
  KVCache cache(m.config(), 256);
  const SeqId seq = cache.create(8);
  const Tokens t = {1, 2, 3};
  StepOutput out;
  auto fails = [&](Step step, const std::string& words) {
    try {
      m.forward(step, cache, out);
      ADD_FAILURE() << "no error for " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Step wrong_start;
  wrong_start.add(seq, 2, t.data(), 3);
  fails(wrong_start, "starts at position 2");
  Step twice;
  twice.add(seq, 0, t.data(), 1);
  twice.add(seq, 0, t.data(), 1);
  fails(twice, "two chunks");
  Step unknown;
  unknown.add(seq + 5, 0, t.data(), 1);
  fails(unknown, "does not hold");
  Tokens nine(9, 1);
  Step past;
  past.add(seq, 0, nine.data(), 9);
  fails(past, "capacity");
  EXPECT_EQ(cache.length(seq), 0);
}

// Runs each prompt through an engine; prompts[i] is submitted before step arrivals[i].
std::vector<Tokens> run_engine(const std::vector<Tokens>& prompts, const SamplingParams& params,
                               const std::vector<int>& arrivals, EngineOptions options = {},
                               int64_t budget = 1 << 14,
                               std::vector<FinishReason>* reasons = nullptr) {
  Transformer& m = *loaded().model;
  KVCache cache(m.config(), budget);
  Engine engine(m, cache, options);
  std::vector<Tokens> out(prompts.size());
  if (reasons) reasons->assign(prompts.size(), FinishReason::kError);
  for (int s = 0, next = 0;; ++s) {
    while (next < static_cast<int>(prompts.size()) && arrivals[next] <= s) {
      RequestEvents events;
      const int i = next;
      events.on_token = [&out, i](int32_t t) { out[i].push_back(t); };
      events.on_finish = [reasons, i](FinishReason r, const std::string&) {
        if (reasons) (*reasons)[i] = r;
      };
      SamplingParams p = params;
      engine.submit(prompts[i], p, std::move(events));
      ++next;
    }
    if (!engine.step() && next == static_cast<int>(prompts.size())) break;
  }
  return out;
}

TEST(Engine, SampledTokensAreTheSameAloneInABatchAndUnderContinuousBatching) {
  const int vocab = loaded().config.vocab_size;
  std::vector<Tokens> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(random_tokens(3 + 9 * i, vocab, 10 + i));
  for (float temperature : {0.0f, 0.8f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_p = 0.95f;
    p.max_new_tokens = 12;
    p.seed = 7;
    std::vector<Tokens> alone;
    for (const Tokens& t : prompts) alone.push_back(run_engine({t}, p, {0})[0]);
    const std::vector<Tokens> batch = run_engine(prompts, p, std::vector<int>(8, 0));
    EngineOptions small_steps;
    small_steps.step_tokens = 16;  // chunked prefills next to decodes
    const std::vector<Tokens> staggered =
        run_engine(prompts, p, {0, 1, 2, 3, 5, 8, 13, 21}, small_steps);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(alone[i].size(), 12u) << i;
      EXPECT_EQ(batch[i], alone[i]) << "temperature " << temperature << " prompt " << i;
      EXPECT_EQ(staggered[i], alone[i]) << "temperature " << temperature << " prompt " << i;
    }
    if (temperature > 0) {
      // the seed matters: another one samples another completion
      SamplingParams q = p;
      q.seed = 8;
      EXPECT_NE(run_engine({prompts[7]}, q, {0})[0], alone[7]);
    }
  }
}

// Penalties, logit_bias and min_tokens: each token is the draw from its row adjusted by the
// rules over the prompt and the tokens before it (computed here from the reported raw rows), and
// the tokens are the same alone, in a batch and under continuous batching.
TEST(Engine, PenalisedAndBiasedDrawsFollowTheAdjustedRowsAndTheirBatchMatesChangeNothing) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  std::vector<Tokens> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(random_tokens(4 + 7 * i, vocab, 40 + i));
  for (float temperature : {0.0f, 0.9f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.max_new_tokens = 16;
    p.seed = 11;
    p.repetition_penalty = 1.4f;
    p.frequency_penalty = 2.0f;
    p.presence_penalty = 0.6f;
    // (the logits span about -12 .. 13 with margins of 1-3 at the top): id 7 wins until its
    // penalties pile up
    p.logit_bias = {{7, 25.0f}, {11, -100.0f}};
    p.stop_ids = {5};
    p.min_tokens = 10;
    p.token_logits = true;
    // one request alone, its raw rows reported
    KVCache cache(m.config(), 1 << 12);
    Engine engine(m, cache);
    Tokens tokens;
    std::vector<std::vector<float>> rows;
    RequestEvents e;
    e.on_token = [&](int32_t t) { tokens.push_back(t); };
    e.on_logits = [&](int64_t, const float* row) { rows.emplace_back(row, row + vocab); };
    engine.submit(prompts[5], p, std::move(e));
    engine.run_until_idle();
    ASSERT_GE(tokens.size(), 10u);
    ASSERT_EQ(rows.size(), tokens.size());
    std::vector<float> scratch;
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::vector<float> adjusted = rows[k];
      adjust_logits(adjusted.data(), vocab, 0, p,
                    TokenHistory{prompts[5], std::span<const int32_t>(tokens).first(k), {}});
      const int64_t position = static_cast<int64_t>(prompts[5].size() + k);
      EXPECT_EQ(tokens[k], sample_keyed(adjusted.data(), vocab, p, position, scratch))
          << "token " << k << " at temperature " << temperature;
      EXPECT_NE(tokens[k], 11);
      if (k < 10) EXPECT_NE(tokens[k], 5) << "a stop id before min_tokens";
    }
    // and the same draws unadjusted differ somewhere (the test would pass without adjustments)
    SamplingParams plain = p;
    plain.repetition_penalty = 1.0f;
    plain.frequency_penalty = plain.presence_penalty = 0.0f;
    plain.logit_bias.clear();
    plain.min_tokens = 0;
    EXPECT_NE(run_engine({prompts[5]}, plain, {0})[0], tokens);
    p.token_logits = false;
    std::vector<Tokens> alone;
    for (const Tokens& t : prompts) alone.push_back(run_engine({t}, p, {0})[0]);
    EXPECT_EQ(alone[5], tokens);
    EngineOptions small_steps;
    small_steps.step_tokens = 16;
    const std::vector<Tokens> staggered = run_engine(prompts, p, {0, 1, 2, 3, 5, 8}, small_steps);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(staggered[i], alone[i]) << "prompt " << i;
  }
}

TEST(Engine, AFullCacheMakesRequestsWaitAndATooLargeOneFailsClearly) {
  const int vocab = loaded().config.vocab_size;
  SamplingParams p;
  p.max_new_tokens = 10;
  std::vector<Tokens> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(50, vocab, 20 + i));
  std::vector<Tokens> alone;
  for (const Tokens& t : prompts) alone.push_back(run_engine({t}, p, {0})[0]);
  // room for two sequences of 60 positions (64 reserved each) at a time
  std::vector<FinishReason> reasons;
  const std::vector<Tokens> squeezed = run_engine(prompts, p, {0, 0, 0, 0}, {}, 128, &reasons);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(squeezed[i], alone[i]) << i;
    EXPECT_EQ(reasons[i], FinishReason::kLength) << i;
  }
  // a request that cannot fit even in an empty cache ends with an error naming the budget
  Transformer& m = *loaded().model;
  KVCache cache(m.config(), 64);  // 80 positions needed
  Engine engine(m, cache);
  std::string error;
  RequestEvents events;
  events.on_finish = [&](FinishReason r, const std::string& e) {
    error = std::string(finish_reason_name(r)) + ": " + e;
  };
  SamplingParams longer = p;
  longer.max_new_tokens = 30;
  engine.submit(prompts[0], longer, std::move(events));
  engine.run_until_idle();
  EXPECT_NE(error.find("error: "), std::string::npos) << error;
  EXPECT_NE(error.find("--kv-cache-tokens"), std::string::npos) << error;
  EXPECT_EQ(cache.reserved_positions(), 0);
}

TEST(Engine, CancelFreesTheCacheAndTheOthersGoOnUnchanged) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  SamplingParams p;
  p.max_new_tokens = 8;
  const Tokens a = random_tokens(20, vocab, 30), b = random_tokens(25, vocab, 31);
  const Tokens a_alone = run_engine({a}, p, {0})[0];
  KVCache cache(m.config(), 4096);
  EngineOptions options;
  options.prefix_cache = false;
  Engine engine(m, cache, options);
  Tokens got_a, got_b;
  FinishReason reason_b = FinishReason::kStop;
  RequestEvents ea, eb;
  ea.on_token = [&](int32_t t) { got_a.push_back(t); };
  eb.on_token = [&](int32_t t) { got_b.push_back(t); };
  eb.on_finish = [&](FinishReason r, const std::string&) { reason_b = r; };
  engine.submit(a, p, std::move(ea));
  const RequestId id_b = engine.submit(b, p, std::move(eb));
  engine.step();
  engine.step();
  EXPECT_EQ(cache.n_sequences(), 2);
  engine.cancel(id_b);
  engine.step();
  EXPECT_EQ(reason_b, FinishReason::kCancelled);
  EXPECT_EQ(cache.n_sequences(), 1);
  engine.run_until_idle();
  EXPECT_EQ(got_a, a_alone);
  EXPECT_LT(got_b.size(), 8u);
  EXPECT_EQ(cache.reserved_positions(), 0);
}

TEST(Engine, PrefixReuseSkipsTheSharedPromptAndChangesNoToken) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  SamplingParams p;
  p.max_new_tokens = 6;
  p.temperature = 0.8f;
  const Tokens system = random_tokens(70, vocab, 40);
  Tokens first = system, second = system;
  for (int32_t t : random_tokens(9, vocab, 41)) first.push_back(t);
  for (int32_t t : random_tokens(12, vocab, 42)) second.push_back(t);
  const Tokens second_fresh = run_engine({second}, p, {0})[0];
  KVCache cache(m.config(), 4096);
  Engine engine(m, cache);
  Tokens got;
  RequestEvents e1, e2;
  e2.on_token = [&](int32_t t) { got.push_back(t); };
  engine.submit(first, p, std::move(e1));
  engine.run_until_idle();
  engine.submit(second, p, std::move(e2));
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().reused_tokens, 70);
  EXPECT_EQ(got, second_fresh);
}

// A chat's next turn needs more room than the last turn reserved: it copies the last turn's
// partial block (61 positions) into a block of its own and takes new blocks for the rest; the
// finished turns leave no sequence behind, only indexed blocks.
TEST(Engine, ALongerNextTurnCopiesThePartialBlockOfTheLastOne) {
  Transformer& m = *loaded().model;
  const int vocab = loaded().config.vocab_size;
  SamplingParams p;
  p.max_new_tokens = 2;
  const Tokens first = random_tokens(60, vocab, 50);  // 62 positions: one block of 64
  KVCache cache(m.config(), 256);
  Engine engine(m, cache);
  Tokens answer;
  RequestEvents e1;
  e1.on_token = [&](int32_t t) { answer.push_back(t); };
  engine.submit(first, p, std::move(e1));
  engine.run_until_idle();
  ASSERT_EQ(answer.size(), 2u);
  Tokens second = first;
  second.push_back(answer[0]);  // the cache holds the prompt and the first answer token
  for (int32_t t : random_tokens(40, vocab, 51)) second.push_back(t);  // 101 + 2: two blocks
  const Tokens fresh = run_engine({second}, p, {0})[0];
  Tokens got;
  RequestEvents e2;
  e2.on_token = [&](int32_t t) { got.push_back(t); };
  const int64_t reused_before = engine.stats().reused_tokens;
  engine.submit(second, p, std::move(e2));
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().reused_tokens - reused_before, 61);
  EXPECT_EQ(cache.n_sequences(), 0);
  // the second turn's 102 positions: a full block and a tail (the first turn's tail superseded)
  EXPECT_EQ(cache.used_blocks(), 2);
  EXPECT_EQ(got, fresh);
  // and a budget with no room to grow falls back to a fresh sequence, still the same tokens
  KVCache small(m.config(), 64);
  EXPECT_FALSE(small.grow(small.create(10), 65));
}

}  // namespace
}  // namespace dsinfer::engine_test
