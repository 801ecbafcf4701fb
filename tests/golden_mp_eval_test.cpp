// Tensor parallelism failures (the mp goldens themselves run in golden_eval_test): a world size
// whose shards are missing ends on every rank with a clear error, never a hang. Skipped when
// mpirun is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer {
namespace {

using json = nlohmann::json;
using test::data_path;

TEST(GoldenMpFailure, ThreeRanksOnTwoShardsFailOnEveryRank) {
  if (!test::has_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_mpi(3, "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
                         /*input=*/"", /*timeout_s=*/60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  // Each rank fails on its own missing shard; mpirun may end the job as soon as the first rank
  // exits, so only one message (whichever rank came first) is certain to reach stderr.
  bool named = false;
  for (int rank = 0; rank < 3; ++rank)
    named = named || r.err.find("missing shard " + ckpt + "/model" + std::to_string(rank) + "-mp3.safetensors") !=
                         std::string::npos;
  EXPECT_TRUE(named) << r.err;
  EXPECT_NE(r.err.find("shard sets mp2"), std::string::npos) << r.err;
}

TEST(GoldenMpFailure, RankWithoutItsShardEndsTheJob) {
  if (!test::has_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  std::remove((ckpt + "/model1-mp2.safetensors").c_str());
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_mpi(2, "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
                         /*input=*/"", /*timeout_s=*/60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_NE(r.err.find("missing shard " + ckpt + "/model1-mp2.safetensors for rank 1 of world size 2"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dsinfer
