// int8 mode (--act-dtype int8: int8 weights and activations, integer dot products) against its
// stated bounds (the story model's distributions: golden_story_quality_test.cpp, labelled slow):
// - the random goldens (tiny-v3, tiny-v2, tiny-v2-lite) against the reference's fp32 logits:
//   within 4x the median row error of the reference demo's own bf16 run, and its argmaxes but
//   one. Why 4x: int8 of one operand (convert --int8's weights, golden_quantized_test.cpp) has a
//   step of max|w| / 127 per 128 values, ~5x bf16's relative rounding of a normal row, and
//   measured 2.0-2.5x the demo's error on the bf16 goldens; rounding both operands so adds about
//   as much again, independently (sqrt 2: ~3.5x). Measured 12-06: tiny-v3 1.15x, tiny-v2 3.4x,
//   tiny-v2-lite 2.8x. The int8 kernels agree bit for bit on every CPU
//   (tests/int8_matmul_test.cpp), but "the rest as bf16" (attention, the products int8 mode does
//   not repack) runs on bf16 kernels only where the CPU has them (Zen 4/5, Intel); on AVX2 fast
//   mode is the exact kernels. So the logits differ by CPU class, and on these random models the
//   argmaxes with them: their top-two margins are mostly near-ties at this error. Zen 3 (exact
//   rest), 12-06: tiny-v2 3.5x, argmax kept 8 of 12 (the demo 10), each lost one in a row whose
//   reference top-two margin (0.006-0.052 of max|ref|) is below that row's max|d| (0.065-0.11); the
//   same 8 with the scalar kernels. Hence one argmax more to spare on the exact path; the bf16 path
//   keeps the bound it was measured against (Zen 5).
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "kernels/kernel_config.h"
#include "test_support.h"

namespace dsinfer::golden_int8_mode_test {
namespace {

using json = nlohmann::json;
using test::data_path;

class GoldenInt8ModeLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenInt8ModeLogits, WithinFourTimesTheDemosBf16ErrorOfFp32) {
  const std::string golden = data_path("golden/" + GetParam());
  const std::string out = test::scratch_dir("out") + "/eval-int8-mode";
  auto r =
      test::run_dsinfer("--act-dtype int8 eval --ckpt-path " + test::convert_golden(GetParam()) +
                        " --case " + golden + "/ref-mp1-fp32.json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const test::AgainstDemo a =
      test::compare_with_demos_bf16(out + ".safetensors", golden, "int8 mode " + GetParam());
  const LogitsComparison &int8 = a.ours, &bf16 = a.demo;
  EXPECT_LE(int8.median_ratio, 4 * bf16.median_ratio);
  EXPECT_LE(int8.far_rows, bf16.far_rows + 1);
  const FastModeKernels rest = with_environment_overrides(cpu_kernel_config()).fast_kernels();
  const int spare = rest == FastModeKernels::kExact ? 2 : 1;
  EXPECT_GE(a.kept, a.demo_kept - spare) << "the rest on " << fast_mode_kernels_name(rest);
  EXPECT_GT(int8.median_ratio, 0) << "int8 mode gave exactly the fp32 logits";
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenInt8ModeLogits,
                         ::testing::Values("tiny-v3", "tiny-v2", "tiny-v2-lite"),
                         test::model_test_name);

}  // namespace
}  // namespace dsinfer::golden_int8_mode_test
