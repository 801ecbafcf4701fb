// Golden conformance: each tiny checkpoint converted with `dsinfer convert`, then run through
// `dsinfer eval` on the reference's case, must reproduce the reference's fp32 logits
// (max|ours - ref| <= 1e-3 * max|ref| per row, same argmax) and greedy completions exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
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
  const std::string golden = data_path("golden/" + gc.model);
  const std::string tag = "ref-mp" + std::to_string(gc.world_size) + "-fp32";
  const json config = json::parse(test::read_file(golden + "/hf/config.json"));
  const std::string ckpt = test::scratch_dir("ckpt");
  auto converted = test::run_dsinfer("convert --hf-ckpt-path " + golden + "/hf --save-path " + ckpt +
                                     " --n-experts " + std::to_string(config["n_routed_experts"].get<int>()) +
                                     " --model-parallel " + std::to_string(gc.world_size));
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  const std::string out = test::scratch_dir("out") + "/eval";
  auto evaluated = test::run_dsinfer("eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;

  SafetensorsFile ours(out + ".safetensors");
  SafetensorsFile ref(golden + "/" + tag + ".safetensors");
  const TensorView& a = ours.get("logits");
  const TensorView& r = ref.get("logits");
  ASSERT_EQ(a.shape, r.shape);
  ASSERT_EQ(a.dtype, DType::kF32);
  const int64_t vocab = r.shape[2], rows = r.shape[0] * r.shape[1];
  const float* x = reinterpret_cast<const float*>(a.data);
  const float* y = reinterpret_cast<const float*>(r.data);
  double worst = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * vocab;
    const float* yr = y + row * vocab;
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(xr[i]) - yr[i]));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(yr[i])));
    }
    const double ratio = max_diff / max_ref;
    worst = std::max(worst, ratio);
    EXPECT_LE(ratio, 1e-3) << "row " << row;
    EXPECT_EQ(std::max_element(xr, xr + vocab) - xr, std::max_element(yr, yr + vocab) - yr) << "argmax of row " << row;
  }
  std::printf("[ golden ] %s %s: worst max|d|/max|ref| = %.3g over %lld rows\n", gc.model.c_str(), tag.c_str(),
              worst, static_cast<long long>(rows));
  RecordProperty("worst_ratio", std::to_string(worst));

  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

INSTANTIATE_TEST_SUITE_P(SingleProcess, GoldenEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 1}, GoldenCase{"tiny-v2", 1},
                                           GoldenCase{"tiny-v2-lite", 1}),
                         case_name);

}  // namespace
}  // namespace dsinfer
