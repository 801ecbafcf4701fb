// `dsinfer generate` at 2 ranks against the reference's generate.py transcripts at world size 2
// (chat-mp2-fp32.json), under each backend (mpirun; gloo through `dsinfer run -n 2 --comm gloo`):
// rank 0 reads the prompts (file or stdin) and broadcasts them, all ranks generate in lockstep,
// only rank 0 prints. Skipped for a backend that is not available here.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "test_support.h"

namespace dsinfer::golden_mp_generate_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;

// (model, backend)
class GoldenMpBatch : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GoldenMpBatch, StdoutMatchesReferenceAtTwoRanks) {
  const auto& [model, backend] = GetParam();
  if (std::string why = test::backend_unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/" + model);
  const json chat = json::parse(test::read_file(golden + "/chat-mp2-fp32.json"));
  ASSERT_EQ(chat["world_size"].get<int>(), 2);
  const std::string ckpt = test::convert_golden(model, 2, /*with_tokenizer=*/true);
  auto r =
      test::run_ranks(backend, 2,
                      "generate --ckpt-path " + ckpt + " --input-file " + golden +
                          "/prompts.txt --max-new-tokens " +
                          std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat["batch"]["stdout"].get<std::string>());
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// Rank 0 schedules continuous batching (joins, leaves, chunked prefill) and broadcasts each step;
// both ranks print the lockstep transcript (rank 0 alone prints).
TEST_P(GoldenMpBatch, ContinuousBatchingAtTwoRanksPrintsTheLockstepTranscript) {
  const auto& [model, backend] = GetParam();
  if (std::string why = test::backend_unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/" + model);
  const json chat = json::parse(test::read_file(golden + "/chat-mp2-fp32.json"));
  const std::string ckpt = test::convert_golden(model, 2, /*with_tokenizer=*/true);
  auto r = test::run_ranks(backend, 2,
                           "generate --ckpt-path " + ckpt + " --input-file " + golden +
                               "/prompts.txt --max-new-tokens " +
                               std::to_string(chat["max_new_tokens"].get<int>()) +
                               " --temperature 0 --max-running 2 --step-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, chat["batch"]["stdout"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Chat, GoldenMpBatch,
                         ::testing::Combine(::testing::Values("tiny-v3-chat", "tiny-v3-story"),
                                            ::testing::Values("mpi", "gloo")),
                         [](const auto& info) {
                           std::string n = test::backend_test_name(std::get<1>(info.param)) + "_" +
                                           std::get<0>(info.param);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The rest run once per backend.
class GoldenMpGenerate : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (std::string why = test::backend_unavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
  test::CommandResult run(const std::string& args, const std::string& input = "") {
    return test::run_ranks(GetParam(), 2, args, input);
  }
};
using GoldenMpPerplexity = GoldenMpGenerate;

TEST_P(GoldenMpGenerate, InteractiveTurnsThroughRankZeroStdin) {
  const std::string golden = data_path("golden/tiny-v3-chat");
  const json chat = json::parse(test::read_file(golden + "/chat-mp2-fp32.json"));
  const json turns = json::parse(test::read_file(golden + "/turns.json"));
  const std::string ckpt = test::convert_golden("tiny-v3-chat", 2, /*with_tokenizer=*/true);
  std::string input, expected;
  size_t answered = 0;
  for (const json& t : turns) input += t.get<std::string>() + "\n";
  for (const json& t : chat["interactive"]) {
    expected += ">>> ";
    if (t.contains("completion")) expected += t["completion"].get<std::string>() + "\n", ++answered;
  }
  expected += ">>> ";  // the prompt that reads /exit
  ASSERT_GT(answered, 0u);
  auto r = run("generate --ckpt-path " + ckpt + " --interactive --max-new-tokens " +
                   std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0",
               input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

TEST_P(GoldenMpGenerate, EndOfInputEndsEveryRank) {
  const std::string ckpt = test::convert_golden("tiny-v3-chat", 2, /*with_tokenizer=*/true);
  auto r = run("generate --ckpt-path " + ckpt + " --interactive --max-new-tokens 3", "Hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(">>> ", 0), 0u);
}

TEST_P(GoldenMpGenerate, UnreadableInputFileFailsEveryRank) {
  const std::string ckpt = test::convert_golden("tiny-v3-chat", 2, /*with_tokenizer=*/true);
  auto r = run("generate --ckpt-path " + ckpt + " --input-file " + ckpt + "/no-such-prompts.txt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_NE(r.err.find("--input-file " + ckpt + "/no-such-prompts.txt: cannot open it"),
            std::string::npos)
      << r.err;
}

TEST_P(GoldenMpPerplexity, TwoRanksGiveTheSingleProcessNll) {
  const std::string golden = data_path("golden/tiny-v3-story");
  const json ref = json::parse(test::read_file(golden + "/ppl-mp1-fp32.json"));
  const std::string ckpt = test::convert_golden("tiny-v3-story", 2, /*with_tokenizer=*/true);
  auto r =
      run("perplexity --ckpt-path " + ckpt + " --case " + golden + "/ppl-mp1-fp32.json --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);  // one JSON document: only rank 0 prints
  ASSERT_EQ(got["nll"].size(), ref["nll"].size());
  for (size_t s = 0; s < ref["nll"].size(); ++s) {
    ASSERT_EQ(got["nll"][s].size(), ref["nll"][s].size());
    for (size_t t = 0; t < ref["nll"][s].size(); ++t)
      EXPECT_NEAR(got["nll"][s][t].get<double>(), ref["nll"][s][t].get<double>(), 1e-4)
          << "sequence " << s << " position " << t;
  }
}

auto backend_name = [](const ::testing::TestParamInfo<std::string>& info) {
  return test::backend_test_name(info.param);
};
INSTANTIATE_TEST_SUITE_P(Ranks, GoldenMpGenerate, ::testing::Values("mpi", "gloo"), backend_name);
INSTANTIATE_TEST_SUITE_P(Ranks, GoldenMpPerplexity, ::testing::Values("mpi", "gloo"), backend_name);

}  // namespace
}  // namespace dsinfer::golden_mp_generate_test
