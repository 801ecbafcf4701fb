// `dsinfer generate --mtp on` against the reference's generate.py transcripts: speculative
// decoding with the story model's MTP module prints the same bytes as the reference (which has
// no MTP) in batch, continuous-batching and interactive mode, at 1 rank and at 2 ranks on both
// backends, and reports its acceptance; without the module it is one clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace dsinfer::golden_mtp_generate_test {
namespace {

using json = nlohmann::json;
using test::data_path;

const std::string kModel = "tiny-v3-story";

json chat(int world_size) {
  return json::parse(test::read_file(
      data_path("golden/" + kModel + "/chat-mp" + std::to_string(world_size) + "-fp32.json")));
}

std::string batch_args(const std::string& ckpt, int max_new_tokens) {
  return "generate --ckpt-path " + ckpt + " --input-file " +
         data_path("golden/" + kModel + "/prompts.txt") + " --max-new-tokens " +
         std::to_string(max_new_tokens) + " --temperature 0 --mtp on";
}

TEST(GoldenMtpGenerate, BatchAndContinuousBatchingPrintTheReferenceTranscript) {
  const json golden = chat(1);
  const std::string ckpt =
      test::convert_golden(kModel, 1, /*with_tokenizer=*/true, /*keep_mtp=*/true);
  const int max_new = golden["max_new_tokens"].get<int>();
  for (const std::string extra : {"", " --max-running 2 --step-tokens 5"}) {
    auto r = test::run_dsinfer(batch_args(ckpt, max_new) + extra);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, golden["batch"]["stdout"].get<std::string>()) << extra;
    EXPECT_NE(r.err.find("MTP drafts accepted"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tokens per sequence step]"), std::string::npos) << r.err;
  }
}

TEST(GoldenMtpGenerate, InteractiveTurnsMatchTheReference) {
  const json golden = chat(1);
  const json turns = json::parse(test::read_file(data_path("golden/" + kModel + "/turns.json")));
  const std::string ckpt =
      test::convert_golden(kModel, 1, /*with_tokenizer=*/true, /*keep_mtp=*/true);
  std::string input, expected;
  for (const json& t : turns) input += t.get<std::string>() + "\n";
  for (const json& t : golden["interactive"]) {
    expected += ">>> ";
    if (t.contains("completion")) expected += t["completion"].get<std::string>() + "\n";
  }
  expected += ">>> ";
  auto r = test::run_dsinfer("generate --ckpt-path " + ckpt + " --interactive --max-new-tokens " +
                                 std::to_string(golden["max_new_tokens"].get<int>()) +
                                 " --temperature 0 --mtp on",
                             input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  EXPECT_NE(r.err.find("MTP drafts accepted"), std::string::npos) << r.err;
}

class GoldenMtpRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenMtpRanks, TwoRanksPrintTheReferenceTranscriptAtWorldSizeTwo) {
  if (std::string why = test::backend_unavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  const json golden = chat(2);
  const std::string ckpt =
      test::convert_golden(kModel, 2, /*with_tokenizer=*/true, /*keep_mtp=*/true);
  // on, and auto (rank 0 decides when to draft, from its own timings, and tells the other rank)
  for (const std::string mode : {"on", "auto --max-running 3"}) {
    std::string args = batch_args(ckpt, golden["max_new_tokens"].get<int>());
    args.replace(args.find("--mtp on"), 8, "--mtp " + mode);
    auto r = test::run_ranks(GetParam(), 2, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, golden["batch"]["stdout"].get<std::string>()) << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GoldenMtpRanks, ::testing::Values("mpi", "gloo"),
                         [](const auto& info) { return test::backend_test_name(info.param); });

TEST(GoldenMtpGenerate, WithoutTheModuleItIsOneClearError) {
  const std::string ckpt = test::convert_golden(kModel, 1, /*with_tokenizer=*/true);
  auto r = test::run_dsinfer(batch_args(ckpt, 5));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mtp0-mp1.safetensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--keep-mtp"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace dsinfer::golden_mtp_generate_test
