// The reference's own logits at depth 4200-4203 (past YaRN's original 4096 positions; tiny-v3,
// batch 2, 4200-token prompts then 4 decode steps: tests/data/golden/tiny-v3/DEPTH.md says how the
// reference made them), at model-parallel 1 and 2 (over MPI, and gloo where it runs), in exact
// mode with the f32 cache: max|ours - ref| <= 1e-3 * max|ref| per row, the same argmax.
#include <gtest/gtest.h>

#include <cstdio>

#include "test_support.h"

namespace dsinfer::golden_depth_test {
namespace {

using test::data_path;

void run_depth_case(int world_size, const std::string& backend, const std::string& flags = "") {
  if (std::string why = test::backend_unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/tiny-v3");
  const std::string tag = "depth-mp" + std::to_string(world_size) + "-fp32";
  const std::string ckpt = test::convert_golden("tiny-v3", world_size);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_ranks(
      backend, world_size,
      "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double worst =
      test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] tiny-v3 %s at %d rank(s) over %s: worst max|d|/max|ref| = %.3g\n",
              tag.c_str(), world_size, backend.c_str(), worst);
}

TEST(GoldenDepth, Mp1MatchesTheReferencePast4096Positions) { run_depth_case(1, "mpi"); }
TEST(GoldenDepth, Mp2OverMpiMatchesTheReferencePast4096Positions) { run_depth_case(2, "mpi"); }
TEST(GoldenDepth, Mp2OverGlooMatchesTheReferencePast4096Positions) { run_depth_case(2, "gloo"); }

}  // namespace
}  // namespace dsinfer::golden_depth_test
