// Text end to end against the reference's generate.py transcripts (chat-mp1-fp32.json): batch
// stdout byte for byte, and the interactive session turn by turn through real stdin; and the
// reference's per-token negative log-likelihoods (ppl-mp1-fp32.json).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "test_support.h"

namespace dsinfer::golden_generate_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;

class GoldenGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenGenerate, BatchStdoutMatchesReference) {
  const std::string golden = data_path("golden/" + GetParam());
  const json chat = json::parse(test::read_file(golden + "/chat-mp1-fp32.json"));
  const std::string ckpt = test::convert_golden(GetParam(), 1, /*with_tokenizer=*/true);
  auto r =
      test::run_dsinfer("generate --ckpt-path " + ckpt + " --input-file " + golden +
                        "/prompts.txt" + " --max-new-tokens " +
                        std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat["batch"]["stdout"].get<std::string>());
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// Continuous batching (two prompts running at a time, the next joining as one finishes, prompts
// prefilled in chunks of at most 5 tokens beside the running decodes) prints the lockstep batch's
// transcript byte for byte: batch invariance.
TEST_P(GoldenGenerate, ContinuousBatchingPrintsTheLockstepTranscript) {
  const std::string golden = data_path("golden/" + GetParam());
  const json chat = json::parse(test::read_file(golden + "/chat-mp1-fp32.json"));
  const std::string ckpt = test::convert_golden(GetParam(), 1, /*with_tokenizer=*/true);
  auto r = test::run_dsinfer("generate --ckpt-path " + ckpt + " --input-file " + golden +
                             "/prompts.txt" + " --max-new-tokens " +
                             std::to_string(chat["max_new_tokens"].get<int>()) +
                             " --temperature 0 --max-running 2 --step-tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat["batch"]["stdout"].get<std::string>());
}

TEST_P(GoldenGenerate, InteractiveTurnsMatchReference) {
  const std::string golden = data_path("golden/" + GetParam());
  const json chat = json::parse(test::read_file(golden + "/chat-mp1-fp32.json"));
  const json turns = json::parse(test::read_file(golden + "/turns.json"));
  const std::string ckpt = test::convert_golden(GetParam(), 1, /*with_tokenizer=*/true);
  std::string input, expected;
  size_t answered = 0;
  for (const json& t : turns) {
    input += t.get<std::string>() + "\n";
  }
  for (const json& t : chat["interactive"]) {
    expected += ">>> ";
    if (t.contains("completion")) expected += t["completion"].get<std::string>() + "\n", ++answered;
  }
  expected += ">>> ";  // the prompt that reads /exit; "this is never read" after it
  ASSERT_GT(answered, 0u);
  auto r =
      test::run_dsinfer("generate --ckpt-path " + ckpt + " --interactive --max-new-tokens " +
                            std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0",
                        input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  // the turns after the first reuse the conversation's cache positions (the same text as above
  // proves that reusing them changes nothing)
  const std::regex reused(R"(\((\d+) reused from the previous turn\))");
  int turns_reusing = 0;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), reused);
       it != std::sregex_iterator(); ++it)
    turns_reusing += std::stoi((*it)[1]) > 0;
  EXPECT_GT(turns_reusing, 0) << r.err;
}

TEST_P(GoldenGenerate, EndOfInputEndsInteractiveCleanly) {
  const std::string ckpt = test::convert_golden(GetParam(), 1, /*with_tokenizer=*/true);
  auto r = test::run_dsinfer("generate --ckpt-path " + ckpt + " --interactive --max-new-tokens 3",
                             "Hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(">>> ", 0), 0u);
}

INSTANTIATE_TEST_SUITE_P(Chat, GoldenGenerate, ::testing::Values("tiny-v3-chat", "tiny-v3-story"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(GoldenPerplexity, PerTokenNllMatchesReference) {
  const std::string golden = data_path("golden/tiny-v3-story");
  const json ref = json::parse(test::read_file(golden + "/ppl-mp1-fp32.json"));
  const std::string ckpt = test::convert_golden("tiny-v3-story", 1, /*with_tokenizer=*/true);
  auto r = test::run_dsinfer("perplexity --ckpt-path " + ckpt + " --case " + golden +
                             "/ppl-mp1-fp32.json --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  ASSERT_EQ(got["nll"].size(), ref["nll"].size());
  double worst = 0;
  for (size_t s = 0; s < ref["nll"].size(); ++s) {
    ASSERT_EQ(got["nll"][s].size(), ref["nll"][s].size());
    for (size_t t = 0; t < ref["nll"][s].size(); ++t) {
      const double d = std::fabs(got["nll"][s][t].get<double>() - ref["nll"][s][t].get<double>());
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-4) << "sequence " << s << " position " << t;
    }
  }
  const double ppl = got["perplexity"].get<double>(), ref_ppl = ref["perplexity"].get<double>();
  EXPECT_LE(std::fabs(ppl - ref_ppl) / ref_ppl, 1e-4) << ppl << " vs " << ref_ppl;
  std::printf(
      "[ golden ] tiny-v3-story perplexity %.4f (reference %.4f), worst per-token |d nll| %.2g\n",
      ppl, ref_ppl, worst);
}

}  // namespace
}  // namespace dsinfer::golden_generate_test
