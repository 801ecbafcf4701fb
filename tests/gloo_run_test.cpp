// The gloo backend through the local launcher: `dsinfer run -n 2 --comm gloo eval` on the tiny-v3
// mp2 golden gives the reference's greedy completions, and a missing shard ends the run in bounded
// time. Skipped when dsinfer was built without gloo (cmake -DDSINFER_GLOO=ON).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace dsinfer {
namespace {

using json = nlohmann::json;
using test::data_path;

test::CommandResult gloo_run(const std::string& args, int timeout_s) {
  const std::string dir = test::scratch_dir("gloo");
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + DSINFER_BIN +
                          " --threads 1 run -n 2 --comm gloo " + args + " </dev/null >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  test::CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_file(out);
  r.err = test::read_file(err);
  return r;
}

std::string convert_mp2() {
  const std::string golden = data_path("golden/tiny-v3");
  const json config = json::parse(test::read_file(golden + "/hf/config.json"));
  const std::string ckpt = test::scratch_dir("ckpt");
  auto r = test::run_dsinfer("-q convert --hf-ckpt-path " + golden + "/hf --save-path " + ckpt + " --n-experts " +
                             std::to_string(config["n_routed_experts"].get<int>()) + " --model-parallel 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ckpt;
}

bool without_gloo(const test::CommandResult& r) {
  return r.err.find("built without the gloo backend") != std::string::npos;
}

TEST(GlooRun, EvalAtTwoRanksGivesTheReferenceCompletions) {
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = convert_mp2();
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = gloo_run("eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out, 120);
  if (without_gloo(r)) GTEST_SKIP() << "built without gloo (cmake -DDSINFER_GLOO=ON)";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json expected = json::parse(test::read_file(golden + "/ref-mp2-fp32.json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

TEST(GlooRun, MissingShardEndsTheRunInBoundedTime) {
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = convert_mp2();
  std::remove((ckpt + "/model1-mp2.safetensors").c_str());
  auto r = gloo_run("eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " +
                        test::scratch_dir("out") + "/eval",
                    90);
  if (without_gloo(r)) GTEST_SKIP() << "built without gloo (cmake -DDSINFER_GLOO=ON)";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_NE(r.err.find("missing shard " + ckpt + "/model1-mp2.safetensors"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dsinfer
