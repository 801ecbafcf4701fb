// The generation loop (src/engine/generate.h, docs/REFERENCE.md section 5) on the tiny-v2-lite
// checkpoint, converted here with the real `dsinfer convert`.
#include "engine/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::generate_test {
namespace {

using test::data_path;
using Tokens = std::vector<int32_t>;
using Batch = std::vector<Tokens>;

const std::string kModel = "golden/tiny-v2-lite";

// Converted once per process (each test that needs it may be its own process under ctest).
const std::string& converted_dir() {
  static const std::string dir = [] {
    const std::string out = test::scratch_dir("tiny-v2-lite-mp1");
    const test::CommandResult r =
        test::run_dsinfer("convert --hf-ckpt-path " + data_path(kModel + "/hf") + " --save-path " +
                          out + " --n-experts 8 --model-parallel 1");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }();
  return dir;
}

ModelConfig tiny_config() { return load_config(data_path(kModel + "/hf/config.json")); }

Comm& local_comm() {
  static std::unique_ptr<Comm> comm = make_local_comm();
  return *comm;
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

std::unique_ptr<Transformer> load_model(const ModelConfig& config) {
  return Transformer::load(config, converted_dir(), local_comm(), pool());
}

// One model with the default config (max_seq_len 16384, max_batch_size 8), shared by the tests.
Transformer& model() {
  static std::unique_ptr<Transformer> m = load_model(tiny_config());
  return *m;
}

Batch run(Transformer& m, const Batch& prompts, int max_new_tokens, int eos_id,
          float temperature = 0.0f, const TokenCallback& on_token = nullptr,
          GenerateStats* stats = nullptr, uint64_t seed = 965) {
  Sampler sampler(seed);
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.eos_id = eos_id;
  options.temperature = temperature;
  return generate(m, prompts, options, sampler, on_token, stats);
}

// The prompts of the golden generate record: lengths 3, 9, 5.
Batch golden_prompts() {
  const nlohmann::json j =
      nlohmann::json::parse(test::read_file(data_path(kModel + "/ref-mp1-fp32.json")));
  return j["generate"]["prompts"].get<Batch>();
}

Tokens prefix_before(const Tokens& t, int32_t eos) {
  return Tokens(t.begin(), std::find(t.begin(), t.end(), eos));
}

// Expects an Error whose message contains `needle`.
template <typename F>
void expect_error_mentioning(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Generate, GreedyMatchesReferenceCompletions) {
  const nlohmann::json j =
      nlohmann::json::parse(test::read_file(data_path(kModel + "/ref-mp1-fp32.json")));
  const auto& g = j["generate"];
  ASSERT_EQ(g["temperature"].get<double>(), 0.0);
  GenerateStats stats;
  const Batch got = run(model(), g["prompts"].get<Batch>(), g["max_new_tokens"].get<int>(),
                        g["eos_id"].get<int>(), 0.0f, nullptr, &stats);
  const Batch want = g["completions"].get<Batch>();
  EXPECT_EQ(got, want);
  EXPECT_EQ(stats.prompt_tokens, 3 + 9 + 5);
  int64_t generated = 0;
  for (const Tokens& t : want) generated += static_cast<int64_t>(t.size());
  EXPECT_EQ(stats.generated_tokens, generated);
}

TEST(Generate, CompletionsAreCutAtMaxNewTokens) {
  const Batch prompts = golden_prompts();
  const Batch full = run(model(), prompts, 12, -1);
  ASSERT_EQ(full.size(), 3u);
  for (const Tokens& t : full) {
    ASSERT_EQ(t.size(), 12u);
    for (int32_t id : t) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 2048);
    }
  }
  for (int n : {0, 1, 2, 5, 11}) {
    const Batch cut = run(model(), prompts, n, -1);
    ASSERT_EQ(cut.size(), 3u);
    for (size_t b = 0; b < 3; ++b)
      EXPECT_EQ(cut[b], Tokens(full[b].begin(), full[b].begin() + n)) << n << " " << b;
  }
}

TEST(Generate, CompletionsAreCutAtFirstEos) {
  const Batch prompts = golden_prompts();
  const Batch full = run(model(), prompts, 12, -1);
  // eos = a token greedy produces mid-way in row 0 (and wherever else it occurs)
  for (size_t pick : {0u, 3u, 7u}) {
    const int32_t eos = full[0][pick];
    std::vector<Tokens> seen(3);
    const Batch got = run(model(), prompts, 12, eos, 0.0f, [&](int row, int32_t token) {
      ASSERT_GE(row, 0);
      ASSERT_LT(row, 3);
      seen[row].push_back(token);
    });
    ASSERT_EQ(got.size(), 3u);
    for (size_t b = 0; b < 3; ++b) {
      EXPECT_EQ(got[b], prefix_before(full[b], eos)) << "eos " << eos << " row " << b;
      EXPECT_EQ(seen[b], got[b]) << "callback, eos " << eos << " row " << b;
    }
    EXPECT_LE(got[0].size(), pick);  // the cut happened in row 0
  }
  // eos also appearing in another row
  for (size_t b = 1; b < 3; ++b) {
    const int32_t eos = full[b][2];
    const Batch got = run(model(), prompts, 12, eos);
    for (size_t r = 0; r < 3; ++r)
      EXPECT_EQ(got[r], prefix_before(full[r], eos)) << "eos " << eos << " row " << r;
  }
}

TEST(Generate, BatchedRowsEqualPromptsRunAlone) {
  Batch prompts = golden_prompts();  // lengths 3, 9, 5
  prompts.push_back({77});           // a single token
  Tokens longer;
  for (int i = 0; i < 20; ++i) longer.push_back(static_cast<int32_t>((i * 397 + 11) % 2048));
  prompts.push_back(longer);
  const int max_new = 8;
  const Batch batched = run(model(), prompts, max_new, -1);
  ASSERT_EQ(batched.size(), prompts.size());
  for (size_t b = 0; b < prompts.size(); ++b) {
    const Batch alone = run(model(), {prompts[b]}, max_new, -1);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(batched[b], alone[0])
        << "row " << b << " (prompt length " << prompts[b].size() << ")";
    EXPECT_EQ(batched[b].size(), static_cast<size_t>(max_new));
  }
  // the order of rows does not matter either
  Batch reversed(prompts.rbegin(), prompts.rend());
  const Batch got = run(model(), reversed, max_new, -1);
  for (size_t b = 0; b < prompts.size(); ++b)
    EXPECT_EQ(got[b], batched[prompts.size() - 1 - b]) << b;
}

TEST(Generate, CallbackSeesEachCompletionInOrder) {
  const Batch prompts = golden_prompts();
  const Batch full = run(model(), prompts, 10, -1);
  const int32_t eos = full[2][4];
  for (int max_new : {3, 6, 10}) {
    std::vector<Tokens> seen(prompts.size());
    std::vector<int> order;
    GenerateStats stats;
    const Batch got = run(
        model(), prompts, max_new, eos, 0.0f,
        [&](int row, int32_t token) {
          seen.at(row).push_back(token);
          order.push_back(row);
        },
        &stats);
    int64_t total = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
      EXPECT_EQ(seen[b], got[b]) << "max_new " << max_new << " row " << b;
      total += static_cast<int64_t>(got[b].size());
    }
    EXPECT_EQ(static_cast<int64_t>(order.size()), total);
    EXPECT_EQ(stats.generated_tokens, total);
  }
  // sampled generation too: the callback sees what is returned
  std::vector<Tokens> seen(prompts.size());
  const Batch sampled = run(model(), prompts, 10, eos, 1.0f,
                            [&](int row, int32_t token) { seen.at(row).push_back(token); });
  for (size_t b = 0; b < prompts.size(); ++b) EXPECT_EQ(seen[b], sampled[b]) << b;
}

TEST(Generate, SampledGenerationIsReproducibleBySeed) {
  const Batch prompts = golden_prompts();
  const Batch a = run(model(), prompts, 10, -1, 1.0f, nullptr, nullptr, 1);
  const Batch b = run(model(), prompts, 10, -1, 1.0f, nullptr, nullptr, 1);
  const Batch c = run(model(), prompts, 10, -1, 1.0f, nullptr, nullptr, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const Tokens& t : a) EXPECT_EQ(t.size(), 10u);
}

TEST(Generate, TooManyPromptsIsAnError) {
  const Batch nine(9, Tokens{5, 6, 7});
  expect_error_mentioning([&] { run(model(), nine, 4, -1); }, "max_batch_size");
  expect_error_mentioning([&] { check_prompts(model().config(), nine); }, "max_batch_size");
  // eight is fine
  const Batch eight(8, Tokens{5, 6, 7});
  EXPECT_EQ(run(model(), eight, 2, -1).size(), 8u);
  // a smaller limit
  ModelConfig c = tiny_config();
  c.max_batch_size = 2;
  expect_error_mentioning([&] { check_prompts(c, Batch(3, Tokens{1})); }, "max_batch_size");
  EXPECT_NO_THROW(check_prompts(c, Batch(2, Tokens{1})));
}

TEST(Generate, PromptLongerThanMaxSeqLenIsAnError) {
  ModelConfig c = tiny_config();
  c.max_seq_len = 16;  // also switches YaRN off: a different, valid model
  const std::unique_ptr<Transformer> m = load_model(c);
  const Tokens seventeen(17, 9);
  expect_error_mentioning([&] { run(*m, {Tokens{1, 2}, seventeen}, 4, -1); }, "max_seq_len");
  expect_error_mentioning([&] { check_prompts(c, {seventeen}); }, "max_seq_len");
  // exactly max_seq_len fits, but leaves no room for a completion
  const Batch full = run(*m, {Tokens(16, 9)}, 4, -1);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_TRUE(full[0].empty());
  // total_len = min(max_seq_len, max_new_tokens + longest prompt): the longer prompt's row is cut
  Tokens nine(9), three = {100, 200, 300};
  for (int i = 0; i < 9; ++i) nine[i] = 50 + i;
  const Batch got = run(*m, {nine, three}, 10, -1);
  EXPECT_EQ(got[0].size(), 7u);
  EXPECT_EQ(got[1].size(), 10u);
  // and still the same tokens as alone (same config)
  const Batch alone0 = run(*m, {nine}, 10, -1);
  const Batch alone1 = run(*m, {three}, 10, -1);
  EXPECT_EQ(got[0], alone0[0]);
  EXPECT_EQ(got[1], alone1[0]);
}

TEST(Generate, EmptyPromptIsAnError) {
  expect_error_mentioning([&] { run(model(), {Tokens{1, 2, 3}, Tokens{}}, 4, -1); }, "empty");
  expect_error_mentioning([&] { run(model(), {Tokens{}}, 4, -1); }, "empty");
  EXPECT_THROW(run(model(), Batch{}, 4, -1), Error);  // no prompts at all
  expect_error_mentioning([&] { check_prompts(model().config(), {Tokens{4}, Tokens{}}); }, "empty");
}

TEST(Generate, OutOfVocabularyTokenIsAnError) {
  expect_error_mentioning([&] { run(model(), {Tokens{1, 2, 2048}}, 4, -1); }, "2048");
  expect_error_mentioning([&] { run(model(), {Tokens{5}, Tokens{-1, 3}}, 4, -1); }, "-1");
  expect_error_mentioning([&] { check_prompts(model().config(), {Tokens{1 << 20}}); }, "vocab");
  expect_error_mentioning([&] { check_prompts(model().config(), {Tokens{3, -1}}); }, "vocab");
  expect_error_mentioning([&] { check_prompts(model().config(), {Tokens{2048}}); }, "vocab");
  EXPECT_NO_THROW(check_prompts(model().config(), {Tokens{0, 2047}}));
}

}  // namespace
}  // namespace dsinfer::generate_test
