// Golden conformance: each tiny checkpoint converted with `dsinfer convert` at model-parallel N,
// then run through `dsinfer eval` at world size N (mpirun for N > 1; skipped without it) on the
// reference's case, must reproduce the reference's fp32 logits
// (max|ours - ref| <= 1e-3 * max|ref| per row, same argmax) and greedy completions exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace dsinfer {
namespace {

using json = nlohmann::json;
using test::data_path;

struct GoldenCase {
  std::string model;
  int world_size;
};

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name = info.param.model + "_mp" + std::to_string(info.param.world_size);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class GoldenEval : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenEval, LogitsAndGreedyCompletionsMatchReference) {
  const GoldenCase& gc = GetParam();
  if (gc.world_size > 1 && !test::has_mpirun())
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/" + gc.model);
  const std::string tag = "ref-mp" + std::to_string(gc.world_size) + "-fp32";
  const std::string ckpt = test::convert_golden(gc.model, gc.world_size);
  const std::string out = test::scratch_dir("out") + "/eval";
  const std::string args = "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out;
  auto r = gc.world_size == 1 ? test::run_dsinfer(args) : test::run_mpi(gc.world_size, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const double worst = test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] %s %s at %d rank(s): worst max|d|/max|ref| = %.3g\n", gc.model.c_str(), tag.c_str(),
              gc.world_size, worst);
  RecordProperty("worst_ratio", std::to_string(worst));
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

INSTANTIATE_TEST_SUITE_P(SingleProcess, GoldenEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 1}, GoldenCase{"tiny-v2", 1},
                                           GoldenCase{"tiny-v2-lite", 1}),
                         case_name);

// Tensor parallelism across processes (mpirun): the reference's mp2/mp4 runs.
INSTANTIATE_TEST_SUITE_P(Mpi, GoldenEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 2}, GoldenCase{"tiny-v2", 2},
                                           GoldenCase{"tiny-v2", 4}, GoldenCase{"tiny-v2-lite", 2},
                                           GoldenCase{"tiny-v2-lite", 4}),
                         case_name);

}  // namespace
}  // namespace dsinfer
