// Tensor parallelism across processes: every ref-mp{N}-fp32 golden, converted at mp N and run
// through `dsinfer eval` by `mpirun -n N`, reproduces the reference's logits (max|d| <= 1e-3 *
// max|ref| per row, same argmax) and greedy completions; a world size whose shards are missing
// ends on every rank with a clear error, never a hang. Skipped when mpirun is not installed.
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

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// `mpirun -n ranks dsinfer --threads 1 <args>` with a bound on its run time.
test::CommandResult run_mpi(int ranks, const std::string& args, int timeout_s = 120) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string dir = test::scratch_dir("mpirun");
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " mpirun -n " + std::to_string(ranks) +
                          " --oversubscribe --bind-to none " + DSINFER_BIN + " --threads 1 " + args +
                          " </dev/null >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  test::CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_file(out);
  r.err = test::read_file(err);
  return r;
}

std::string convert(const std::string& model, int world_size) {
  const std::string golden = data_path("golden/" + model);
  const json config = json::parse(test::read_file(golden + "/hf/config.json"));
  const std::string ckpt = test::scratch_dir("ckpt");
  auto r = test::run_dsinfer("-q convert --hf-ckpt-path " + golden + "/hf --save-path " + ckpt + " --n-experts " +
                             std::to_string(config["n_routed_experts"].get<int>()) + " --model-parallel " +
                             std::to_string(world_size));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ckpt;
}

struct GoldenCase {
  std::string model;
  int world_size;
};

class GoldenMpEval : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenMpEval, LogitsAndGreedyCompletionsMatchReference) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const GoldenCase& gc = GetParam();
  const std::string golden = data_path("golden/" + gc.model);
  const std::string tag = "ref-mp" + std::to_string(gc.world_size) + "-fp32";
  const std::string ckpt = convert(gc.model, gc.world_size);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = run_mpi(gc.world_size, "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  SafetensorsFile ours(out + ".safetensors");
  SafetensorsFile ref(golden + "/" + tag + ".safetensors");
  const TensorView& a = ours.get("logits");
  const TensorView& b = ref.get("logits");
  ASSERT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.dtype, DType::kF32);
  const int64_t vocab = b.shape[2], rows = b.shape[0] * b.shape[1];
  const float* x = reinterpret_cast<const float*>(a.data);
  const float* y = reinterpret_cast<const float*>(b.data);
  double worst = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * vocab;
    const float* yr = y + row * vocab;
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(xr[i]) - yr[i]));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(yr[i])));
    }
    worst = std::max(worst, max_diff / max_ref);
    EXPECT_LE(max_diff / max_ref, 1e-3) << "row " << row;
    EXPECT_EQ(std::max_element(xr, xr + vocab) - xr, std::max_element(yr, yr + vocab) - yr) << "argmax of row " << row;
  }
  std::printf("[ golden ] %s %s at %d ranks (mpi): worst max|d|/max|ref| = %.3g over %lld rows\n", gc.model.c_str(),
              tag.c_str(), gc.world_size, worst, static_cast<long long>(rows));
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

INSTANTIATE_TEST_SUITE_P(Mpi, GoldenMpEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 2}, GoldenCase{"tiny-v2", 2},
                                           GoldenCase{"tiny-v2", 4}, GoldenCase{"tiny-v2-lite", 2},
                                           GoldenCase{"tiny-v2-lite", 4}),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           std::string name = info.param.model + "_mp" + std::to_string(info.param.world_size);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(GoldenMpFailure, ThreeRanksOnTwoShardsFailOnEveryRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = convert("tiny-v3", 2);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = run_mpi(3, "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
                   /*timeout_s=*/60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  // every rank names its missing shard and the shard set the directory holds
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.err.find("missing shard " + ckpt + "/model" + std::to_string(rank) + "-mp3.safetensors"),
              std::string::npos)
        << r.err;
  EXPECT_NE(r.err.find("shard sets mp2"), std::string::npos) << r.err;
}

TEST(GoldenMpFailure, RankWithoutItsShardEndsTheJob) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = convert("tiny-v3", 2);
  std::remove((ckpt + "/model1-mp2.safetensors").c_str());
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = run_mpi(2, "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
                   /*timeout_s=*/60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_NE(r.err.find("missing shard " + ckpt + "/model1-mp2.safetensors for rank 1 of world size 2"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dsinfer
