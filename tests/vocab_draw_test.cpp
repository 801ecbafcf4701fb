// The engine's draw (engine/sampling.h, engine/vocab_draw.h): sample_keyed draws from
// softmax(logits / T) cut by top_k / top_p / min_p; adjust_logits (penalties, logit_bias,
// min_tokens) against a direct computation; ranks that each hold a slice of the vocabulary and
// combine their best candidates pick the token the whole row gives, bit for bit, for greedy and
// sampled rows, with ties, -inf and NaN; a draw that needs the whole row refuses a slice.
#include "engine/vocab_draw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <barrier>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"

namespace dsinfer::vocab_draw_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Draws at positions 0 .. n_draws - 1 (each its own stream) against p, as frequencies.
void expect_draws_follow(const std::vector<float>& logits, const SamplingParams& params,
                         const std::vector<double>& p) {
  const int n_draws = 100000;
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> scratch;
  for (int pos = 0; pos < n_draws; ++pos)
    ++counts[sample_keyed(logits.data(), static_cast<int64_t>(logits.size()), params, pos,
                          scratch)];
  double chi2 = 0;
  int dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "id " << i << " is cut";
      continue;
    }
    const double expected = p[i] * n_draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++dof;
  }
  // at most 5 degrees of freedom: P(chi2 > 25) ~ 1.4e-4
  EXPECT_LT(chi2, 25.0) << "T=" << params.temperature << " top_k=" << params.top_k
                        << " top_p=" << params.top_p << " dof " << dof;
}

std::vector<double> softmax_over(const std::vector<float>& logits, double t,
                                 const std::vector<bool>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (keep[i]) sum += p[i] = std::exp(logits[i] / t);
  for (double& v : p) v /= sum;
  return p;
}

TEST(SampleKeyed, GreedyIsTheFirstMaximumAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams greedy;
  std::vector<float> scratch;
  const std::vector<float> ties = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(sample_keyed(ties.data(), 5, greedy, 0, scratch), 1);  // as torch.argmax
  const std::vector<float> with_nan = {nan, 1.0f, 3.0f, nan, 3.0f};
  EXPECT_EQ(sample_keyed(with_nan.data(), 5, greedy, 0, scratch), 2);
  const std::vector<float> all_nan = {nan, nan};
  EXPECT_EQ(sample_keyed(all_nan.data(), 2, greedy, 0, scratch), 0);
  const std::vector<float> all_masked = {-kInf, -kInf, -kInf};
  EXPECT_EQ(sample_keyed(all_masked.data(), 3, greedy, 0, scratch), 0);
}

TEST(SampleKeyed, DrawsFollowSoftmaxOverTemperatureAndItsCuts) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f};
  const std::vector<bool> all(6, true);
  SamplingParams p;
  for (float t : {1.0f, 0.6f, 2.5f}) {
    p.temperature = t;
    expect_draws_follow(logits, p, softmax_over(logits, t, all));
  }
  p.temperature = 1.0f;
  p.top_k = 2;  // ids 3 and 0, renormalised
  expect_draws_follow(logits, p,
                      softmax_over(logits, 1.0, {true, false, false, true, false, false}));
  p.top_k = 0;
  p.top_p = 0.8f;  // softmax: id 3 0.539, id 0 0.198, id 1 0.120, ...: the first three reach 0.8
  expect_draws_follow(logits, p,
                      softmax_over(logits, 1.0, {true, true, false, true, false, false}));
  // -inf is never drawn; large logits stay finite
  const std::vector<float> masked = {-kInf, 0.0f, -kInf, 1.0f};
  p.top_p = 1.0f;
  expect_draws_follow(masked, p, softmax_over(masked, 1.0, {false, true, false, true}));
  const std::vector<float> big = {1000.0f, 999.0f, 998.5f, 1001.0f};
  expect_draws_follow(big, p,
                      softmax_over({1.0f, 0.0f, -0.5f, 2.0f}, 1.0, {true, true, true, true}));
}

TEST(SampleKeyed, MinPKeepsTheIdsAtLeastMinPTimesTheLikeliest) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.5f};
  // softmax over T = 1: id 3 0.539; min_p 0.3 keeps p >= 0.162: ids 3 (1) and 0 (0.368); 1
  // (0.223) and the rest below
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;
  expect_draws_follow(logits, p,
                      softmax_over(logits, 1.0, {true, false, false, true, false, false}));
  p.min_p = 0.2f;  // id 1 (0.223) joins
  expect_draws_follow(logits, p,
                      softmax_over(logits, 1.0, {true, true, false, true, false, false}));
  p.top_k = 3;  // with a ranking cut too: the same set (min_p is relative to the likeliest)
  expect_draws_follow(logits, p,
                      softmax_over(logits, 1.0, {true, true, false, true, false, false}));
  p.top_k = 0;
  p.temperature = 2.0f;  // after temperature: at T = 2 id 4 is 0.368 of id 3, id 2 0.301
  p.min_p = 0.35f;
  expect_draws_follow(logits, p, softmax_over(logits, 2.0, {true, true, false, true, true, false}));
  p.min_p = 1.0f;  // only the likeliest
  expect_draws_follow(logits, p,
                      softmax_over(logits, 2.0, {false, false, false, true, false, false}));
}

// adjust_logits against the rules written out: repetition over the prompt and the completion
// (once per id, dividing positive logits and multiplying negative ones), frequency and presence
// over the completion only (pending drafts count as completion), bias added, stop ids masked
// until min_tokens; slices adjusted apart give the whole row's values.
TEST(AdjustLogits, PenaltiesBiasAndMinTokensFollowTheirRules) {
  const int64_t vocab = 10;
  std::vector<float> row(vocab);
  for (int64_t i = 0; i < vocab; ++i) row[i] = static_cast<float>(i) - 4.5f;  // -4.5 .. 4.5
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{0, 10.0f}, {7, -3.0f}};
  p.stop_ids = {9};
  p.min_tokens = 5;
  const std::vector<int32_t> prompt = {1, 8, 8}, generated = {2, 8, 2}, pending = {2, 6};
  const TokenHistory h{prompt, generated, pending};
  EXPECT_TRUE(adjusts_logits(p));
  std::vector<float> got = row;
  adjust_logits(got.data(), vocab, 0, p, h);
  std::vector<float> want = row;
  for (int id : {1, 8, 2, 6}) want[id] = want[id] > 0 ? want[id] / 2.0f : want[id] * 2.0f;
  want[2] -= 0.5f * 3 + 0.25f;  // three times in the completion (two committed, one pending)
  want[8] -= 0.5f * 1 + 0.25f;  // once in the completion (the prompt's two do not count)
  want[6] -= 0.5f * 1 + 0.25f;
  want[0] += 10.0f;
  want[7] -= 3.0f;
  // (five completion tokens, three committed and two pending: min_tokens 5 is met, id 9 stays)
  EXPECT_EQ(got, want);
  // one completion token fewer: the stop id is masked
  const TokenHistory shorter{prompt, generated, std::span<const int32_t>(pending).first(1)};
  got = row;
  adjust_logits(got.data(), vocab, 0, p, shorter);
  EXPECT_EQ(got[9], -kInf);
  // slices of 3, 3 and 4 ids adjusted apart: the whole row's values
  std::vector<float> whole = row, sliced = row;
  adjust_logits(whole.data(), vocab, 0, p, h);
  adjust_logits(sliced.data(), 3, 0, p, h);
  adjust_logits(sliced.data() + 3, 3, 3, p, h);
  adjust_logits(sliced.data() + 6, 4, 6, p, h);
  EXPECT_EQ(sliced, whole);
  // the defaults change nothing
  EXPECT_FALSE(adjusts_logits(SamplingParams{}));
}

// race_candidate skips the ids whose value provably stays below the best so far; the winner and
// its value must be those of computing every id's value, bit for bit: flat rows (nearly every id
// skipped), peaked ones, huge and tiny scales, a tiny temperature, -inf, +inf and NaN, slices
// at an offset (the ids key the random stream). Fails if the bound were too tight (a skipped id
// that would have won).
TEST(SampleKeyed, PrunedRaceIsTheExhaustiveRaceBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int skipped_rows_checked = 0;
  for (int row = 0; row < 400; ++row) {
    const int64_t n = row % 4 == 0 ? 129280 : 1 + static_cast<int64_t>(rng() % 5000);
    const float spread = std::array<float, 5>{0.01f, 1.0f, 4.0f, 30.0f, 3000.0f}[row % 5];
    std::vector<float> logits(static_cast<size_t>(n));
    for (float& v : logits) v = spread * normal(rng);
    if (row % 7 == 1) logits[rng() % n] = -kInf;
    if (row % 11 == 2) logits[rng() % n] = kInf;
    if (row % 13 == 3) logits[rng() % n] = nan;
    SamplingParams p;
    p.temperature = std::array<float, 4>{1.0f, 0.6f, 1e-6f, 3.0f}[row % 4];
    p.seed = rng();
    const int64_t first = row % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 100000);
    const RaceCandidate pruned = race_candidate(logits.data(), n, first, p, row);
    const RaceCandidate all = race_candidate_exhaustive(logits.data(), n, first, p, row);
    ASSERT_EQ(pruned.index, all.index) << "row " << row;
    ASSERT_EQ(std::isnan(pruned.value), std::isnan(all.value)) << "row " << row;
    if (!std::isnan(all.value)) ASSERT_EQ(pruned.value, all.value) << "row " << row;
    skipped_rows_checked += n > 1000;
  }
  EXPECT_GT(skipped_rows_checked, 100);
}

// World ranks in threads: all_gather meets at a barrier; nothing else is used.
class ThreadComm : public Comm {
 public:
  struct Shared {
    explicit Shared(int world) : world(world), meet(world), slots(world) {}
    int world;
    std::barrier<> meet;
    std::vector<std::vector<float>> slots;
  };
  ThreadComm(Shared& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return shared_.world; }
  const char* name() const override { return "threads"; }
  void all_gather(const float* in, int64_t n, float* out) override {
    shared_.slots[rank_].assign(in, in + n);
    shared_.meet.arrive_and_wait();
    for (int r = 0; r < shared_.world; ++r) {
      EXPECT_EQ(static_cast<int64_t>(shared_.slots[r].size()), n);
      std::copy(shared_.slots[r].begin(), shared_.slots[r].end(), out + r * n);
    }
    shared_.meet.arrive_and_wait();  // before anyone's next write
  }
  void all_reduce_sum(float*, int64_t) override { fail("threads: no all_reduce"); }
  void broadcast(std::string&, int) override { fail("threads: no broadcast"); }
  void barrier() override { shared_.meet.arrive_and_wait(); }

 private:
  Shared& shared_;
  int rank_;
};

// rows [n_rows, vocab] drawn by `world` ranks holding equal slices; each rank's tokens.
std::vector<std::vector<int32_t>> draw_on_slices(const std::vector<float>& rows, int64_t vocab,
                                                 int world, const std::vector<RowDraw>& draws) {
  const int64_t n_rows = static_cast<int64_t>(rows.size()) / vocab, local = vocab / world;
  ThreadComm::Shared shared(world);
  std::vector<std::vector<int32_t>> tokens(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      StepOutput out;
      out.logit_columns = local;
      out.vocab_offset = r * local;
      for (int64_t b = 0; b < n_rows; ++b)
        out.logits.insert(out.logits.end(), rows.begin() + b * vocab + r * local,
                          rows.begin() + b * vocab + (r + 1) * local);
      ThreadComm comm(shared, r);
      tokens[r] = draw_tokens(out, vocab, draws, comm);
    });
  for (std::thread& t : ranks) t.join();
  return tokens;
}

// The tokens draw_tokens gives for `rows` [rows, vocab] held whole by one process.
std::vector<int32_t> draw_whole(const std::vector<float>& rows, int64_t vocab,
                                const std::vector<RowDraw>& draws) {
  StepOutput whole;
  whole.logits = rows;
  whole.logit_columns = vocab;
  ThreadComm::Shared one(1);
  ThreadComm solo(one, 0);
  return draw_tokens(whole, vocab, draws, solo);
}

// Adjusted rows drawn whole and over slices give the same tokens, greedy and sampled.
TEST(VocabDraw, AdjustedRowsDrawTheSameTokenWholeAndSliced) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t vocab = 24, n_rows = 4;
  std::vector<float> rows(static_cast<size_t>(n_rows * vocab));
  for (float& v : rows) v = normal(rng);
  std::vector<SamplingParams> how(2);
  for (SamplingParams& p : how) {
    p.frequency_penalty = 1.5f;
    p.repetition_penalty = 1.7f;
    p.logit_bias = {{5, 4.0f}, {17, -100.0f}};
  }
  how[1].temperature = 1.0f;
  const std::vector<int32_t> prompt = {3, 4, 17}, generated = {5, 5, 11, 23};
  std::vector<RowDraw> draws;
  for (int64_t b = 0; b < n_rows; ++b)
    draws.push_back({b, &how[b % 2], 100 + b, TokenHistory{prompt, generated, {}}});
  const std::vector<int32_t> expected = draw_whole(rows, vocab, draws);
  std::vector<float> scratch;
  for (int64_t b = 0; b < n_rows; ++b) {
    std::vector<float> adjusted(rows.begin() + b * vocab, rows.begin() + (b + 1) * vocab);
    adjust_logits(adjusted.data(), vocab, 0, *draws[b].params, draws[b].history);
    EXPECT_EQ(expected[b],
              sample_keyed(adjusted.data(), vocab, *draws[b].params, 100 + b, scratch));
    EXPECT_NE(expected[b], 17);
  }
  for (int world : {2, 3, 4})
    for (const std::vector<int32_t>& got : draw_on_slices(rows, vocab, world, draws))
      EXPECT_EQ(got, expected) << "world " << world;
}

// Rows drawn on a thread pool (the engine passes the model's) give the tokens drawn one after
// another: adjusted, masked (a grammar's bitmask) and plain rows, greedy and sampled.
TEST(VocabDraw, RowsDrawnOnAPoolAreThoseDrawnInTurn) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t vocab = 300, n_rows = 37;
  std::vector<float> rows(static_cast<size_t>(n_rows * vocab));
  for (float& v : rows) v = normal(rng);
  std::vector<SamplingParams> how(3);
  how[1].temperature = 1.0f;
  how[2].temperature = 0.7f;
  how[2].presence_penalty = 1.0f;
  how[2].logit_bias = {{7, 3.0f}};
  std::vector<uint32_t> allowed((vocab + 31) / 32, 0);
  for (int64_t id = 0; id < vocab; id += 7) allowed[id / 32] |= 1u << (id % 32);
  const std::vector<int32_t> generated = {1, 2, 7};
  std::vector<RowDraw> draws;
  for (int64_t b = 0; b < n_rows; ++b)
    draws.push_back({b, &how[b % 3], 50 + b, TokenHistory{{}, generated, {}},
                     b % 4 == 1 ? allowed.data() : nullptr});
  const std::vector<int32_t> in_turn = draw_whole(rows, vocab, draws);
  StepOutput whole;
  whole.logits = rows;
  whole.logit_columns = vocab;
  ThreadComm::Shared one(1);
  ThreadComm solo(one, 0);
  ThreadPool pool(3);
  EXPECT_EQ(draw_tokens(whole, vocab, draws, solo, &pool), in_turn);
  for (int64_t b = 1; b < n_rows; b += 4) EXPECT_EQ(in_turn[b] % 7, 0) << "masked row " << b;
}

TEST(VocabDraw, SlicesGiveTheWholeRowsTokenWithTiesInfinitiesAndNaN) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(0, 5);  // many ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<SamplingParams> how(3);
  how[1].temperature = 0.8f;
  how[2].temperature = 1.5f;
  how[2].seed = 77;
  for (int trial = 0; trial < 60; ++trial) {
    const int world = 1 + trial % 4;
    const int64_t vocab = world * (1 + trial % 13), n_rows = 5;
    std::vector<float> rows(static_cast<size_t>(n_rows * vocab));
    for (float& v : rows) {
      const int k = small(rng);
      v = k == 0 ? -kInf : k == 1 && trial % 3 == 0 ? nan : static_cast<float>(k);
    }
    if (trial % 5 == 0) std::fill(rows.begin(), rows.begin() + vocab, nan);  // a row of NaN only
    if (trial % 7 == 0) std::fill(rows.begin() + vocab, rows.begin() + 2 * vocab, -kInf);
    std::vector<RowDraw> draws;
    for (int64_t b = 0; b < n_rows; ++b)
      draws.push_back({n_rows - 1 - b, &how[b % 3], 1000 + b});  // any order
    const std::vector<int32_t> expected = draw_whole(rows, vocab, draws);
    std::vector<float> scratch;
    for (size_t i = 0; i < draws.size(); ++i) {
      // a NaN anywhere in a row is no draw (the request ends with an error); -inf is masked
      const float* row = rows.data() + draws[i].row * vocab;
      const bool has_nan = std::any_of(row, row + vocab, [](float v) { return std::isnan(v); });
      ASSERT_EQ(expected[i],
                has_nan ? kNoTokenFromNonFiniteLogits
                        : sample_keyed(row, vocab, *draws[i].params, draws[i].position, scratch));
    }
    for (const std::vector<int32_t>& got : draw_on_slices(rows, vocab, world, draws))
      ASSERT_EQ(got, expected) << "trial " << trial << ", world " << world;
  }
}

// Overflowing weights or configs give NaN or +inf logits: no token (the engine ends the request
// with an error, exit 0 and an empty completion before), whole rows and slices alike, whichever
// rank's slice holds the bad value; -inf alone is a masked id and draws.
TEST(VocabDraw, NaNOrPlusInfinityAnywhereIsNoToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t vocab = 8;
  SamplingParams greedy, hot;
  hot.temperature = 1.0f;
  for (const SamplingParams* how : {&greedy, &hot})
    for (int64_t at = 0; at < vocab; ++at)
      for (const float bad : {nan, kInf, -kInf}) {
        std::vector<float> row = {1, 2, 3, 4, 5, 6, 7, 0.5f};
        row[static_cast<size_t>(at)] = bad;
        const int32_t want = bad == -kInf ? 0 : kNoTokenFromNonFiniteLogits;
        for (int world : {1, 2, 4}) {
          for (const std::vector<int32_t>& got : draw_on_slices(row, vocab, world, {{0, how, 3}}))
            if (bad == -kInf)
              EXPECT_GE(got[0], 0);
            else
              EXPECT_EQ(got[0], want) << "world " << world << ", bad id " << at;
        }
      }
}

TEST(VocabDraw, ASliceRefusesADrawThatNeedsTheWholeRow) {
  SamplingParams top_k;
  top_k.temperature = 1.0f;
  top_k.top_k = 3;
  StepOutput out;
  out.logits.assign(4, 0.0f);
  out.logit_columns = 4;
  out.vocab_offset = 4;  // rank 1 of 2
  ThreadComm::Shared one(1);
  ThreadComm comm(one, 0);
  EXPECT_THROW(draw_tokens(out, 8, {{0, &top_k, 5}}, comm), Error);
  EXPECT_THROW(draw_tokens(out, 8, {{1, &top_k, 5}}, comm), Error);  // past the rows
}

}  // namespace
}  // namespace dsinfer::vocab_draw_test
