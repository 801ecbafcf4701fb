// Real torchrun (Debian's python3-torch 1.13): `torchrun --no_python --nproc_per_node 2 dsinfer
// eval` on the tiny-v3 mp2 golden matches the reference as at one process. torchrun's agent holds
// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so dsinfer's store takes MASTER_PORT+1.
// --redirects 1 --tee 1 dodge torchrun 1.13's crash under Python 3.11 when it does not redirect.
// Skipped when torchrun is not installed (apt-get install --no-install-recommends python3-torch)
// or dsinfer was built without gloo.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "parallel/free_port.h"
#include "test_support.h"

namespace dsinfer::golden_torchrun_test {
namespace {

using json = nlohmann::json;
using test::data_path;

bool has_torchrun() { return std::system("command -v torchrun >/dev/null 2>&1") == 0; }

TEST(GoldenTorchrun, EvalMp2MatchesReference) {
  if (!has_torchrun())
    GTEST_SKIP()
        << "torchrun not installed (apt-get install --no-install-recommends python3-torch)";
  const std::string model = "tiny-v3", tag = "ref-mp2-fp32";
  const std::string golden = data_path("golden/" + model);
  const std::string ckpt = test::convert_golden(model, 2);
  const std::string out = test::scratch_dir("out") + "/eval";
  const std::string logs = test::scratch_dir("torchrun-logs");
  auto r = test::run_command(
      "timeout 240 torchrun --no_python --nproc_per_node 2 --redirects 1 --tee 1 --log_dir " +
      logs + " --master_port " + std::to_string(pick_free_port(2)) + " " + DSINFER_BIN +
      " --threads 1 eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " +
      out);
  if (r.err.find("built without the gloo backend") != std::string::npos)
    GTEST_SKIP() << "built without gloo (cmake -DDSINFER_GLOO=ON)";
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("comm: gloo backend, rank 0 of 2"), std::string::npos) << r.err;
  const double worst =
      test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] %s %s under torchrun (2 ranks): worst max|d|/max|ref| = %.3g\n",
              model.c_str(), tag.c_str(), worst);
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

}  // namespace
}  // namespace dsinfer::golden_torchrun_test
