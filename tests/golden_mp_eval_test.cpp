// Golden conformance across processes: each tiny checkpoint converted at model-parallel N, run
// through `dsinfer eval` at world size N under each backend (mpirun; gloo through `dsinfer run -n N
// --comm gloo`, the torchrun-style environment), must reproduce the reference's fp32 logits of
// that world size (max|ours - ref| <= 1e-3 * max|ref| per row, same argmax) and its greedy
// completions exactly. Skipped for a backend that is not available here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace dsinfer::golden_mp_eval_test {
namespace {

using json = nlohmann::json;
using test::data_path;

struct MpCase {
  std::string model;
  int world_size;
  std::string backend;
};

void PrintTo(const MpCase& c, std::ostream* os) {
  *os << c.model << " mp" << c.world_size << " over " << c.backend;
}

std::string case_name(const ::testing::TestParamInfo<MpCase>& info) {
  std::string name = test::backend_test_name(info.param.backend) + "_" + info.param.model + "_mp" +
                     std::to_string(info.param.world_size);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class GoldenMpEval : public ::testing::TestWithParam<MpCase> {};

TEST_P(GoldenMpEval, LogitsAndGreedyCompletionsMatchReference) {
  const MpCase& c = GetParam();
  if (std::string why = test::backend_unavailable(c.backend); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/" + c.model);
  const std::string tag = "ref-mp" + std::to_string(c.world_size) + "-fp32";
  const std::string ckpt = test::convert_golden(c.model, c.world_size);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_ranks(
      c.backend, c.world_size,
      "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const double worst =
      test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] %s %s at %d rank(s) over %s: worst max|d|/max|ref| = %.3g\n",
              c.model.c_str(), tag.c_str(), c.world_size, c.backend.c_str(), worst);
  RecordProperty("worst_ratio", std::to_string(worst));
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

std::vector<MpCase> every_mp_golden() {
  std::vector<MpCase> cases;
  for (const char* backend : {"mpi", "gloo"})
    for (const auto& [model, world_size] :
         std::vector<std::pair<std::string, int>>{{"tiny-v3", 2},
                                                  {"tiny-v2", 2},
                                                  {"tiny-v2", 4},
                                                  {"tiny-v2-lite", 2},
                                                  {"tiny-v2-lite", 4}})
      cases.push_back({model, world_size, backend});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Ranks, GoldenMpEval, ::testing::ValuesIn(every_mp_golden()), case_name);

}  // namespace
}  // namespace dsinfer::golden_mp_eval_test
