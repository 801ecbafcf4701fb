// Two machines on one host: tests/two_host.sh makes two network namespaces joined by a veth pair
// and runs 2 ranks in each (gloo over the veth, MASTER_ADDR in the first namespace); the tiny-v2
// mp4 golden through `eval` must match the reference as at one process. Once with the ranks
// started directly (torchrun-style environment, as a shell loop or Slurm would), once with
// `torchrun --no_python --nnodes 2` in each namespace (the README's multi-machine command), and
// once by mpirun with a hostfile of both (MPI backend; its daemon in the second namespace started
// through tests/netns_rsh.sh, the stand-in for ssh). Skipped when not root, when namespaces are not
// permitted, without gloo (the gloo ones), or without torchrun / mpirun.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "test_support.h"

namespace dsinfer::golden_two_host_test {
namespace {

using json = nlohmann::json;
using test::data_path;

const std::string kScript = data_path("../two_host.sh");

// What each process of the run wrote to its own files (the script prints them only when it ends
// on its own, not when our timeout ends it).
std::string logs_of_every_process(const std::string& dir) {
  std::string all;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    all += "----- " + entry.path().string() + "\n" + test::read_file(entry.path().string());
  }
  return all;
}

// two_host.sh's stderr (its ping and relay lines) goes to *err_out when given.
void eval_across_two_hosts(const std::string& launcher, const std::string& network_env = "",
                           std::string* err_out = nullptr) {
  const std::string model = "tiny-v2", tag = "ref-mp4-fp32";
  const std::string golden = data_path("golden/" + model);
  const std::string ckpt = test::convert_golden(model, 4);
  const std::string out = test::scratch_dir("out") + "/eval";
  const std::string logs = test::scratch_dir("logs");
  // The eval takes seconds; a rank stuck in a collective names itself within the comm timeout,
  // a rank stuck elsewhere is ended by the script's per-rank timeout, and the script by ours.
  auto r = test::run_command(network_env + " LAUNCHER=" + launcher +
                             " RANKS_PER_HOST=2 DSINFER_COMM_TIMEOUT=90 TWO_HOST_TIMEOUT=150"
                             " TWO_HOST_LOGS=" +
                             logs + " timeout -k 10 240 " + kScript + " " + DSINFER_BIN +
                             " eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag +
                             ".json --out " + out);
  if (r.exit_code == 77) GTEST_SKIP() << r.err;
  if (r.err.find("built without MPI") != std::string::npos) GTEST_SKIP() << "built without MPI";
  if (r.err.find("built without the gloo backend") != std::string::npos)
    GTEST_SKIP() << "built without gloo (cmake -DDSINFER_GLOO=ON)";
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << logs_of_every_process(logs);
  const double worst =
      test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] %s %s on 2 namespaces x 2 ranks (%s): worst max|d|/max|ref| = %.3g\n",
              model.c_str(), tag.c_str(), launcher.c_str(), worst);
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
  if (err_out) *err_out = r.err;
}

TEST(GoldenTwoHost, EvalMp4WithTwoRanksInEachNamespace) { eval_across_two_hosts("direct"); }

TEST(GoldenTwoHost, EvalMp4WithTorchrunInEachNamespace) { eval_across_two_hosts("torchrun"); }

// The emulated network of bench/scale_out.sh: TUN devices joined by build/net_delay (200 us one
// way) and an htb rate of 1 Gbit/s. The golden still matches, every ping's round trip is at
// least the two delays (a relay that forwarded at once would fail it), and the relay relayed.
TEST(GoldenTwoHost, EvalMp4OverADelayedRateLimitedNetwork) {
  std::string err;
  eval_across_two_hosts("direct",
                        "TWO_HOST_DELAY_US=200 TWO_HOST_RATE=1gbit TWO_HOST_PING=10 "
                        "TWO_HOST_RELAY_REPORT=1 NET_DELAY=" +
                            std::string(DSINFER_NET_DELAY_BIN),
                        &err);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(rtt min/avg/max/mdev = ([0-9.]+)/)"))) << err;
  EXPECT_GE(std::stod(m[1]), 0.4) << "ping min round trip, ms";
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(net_delay: \S+ -> \S+: (\d+) packets)")))
      << err;
  EXPECT_GT(std::stoll(m[1]), 10);
}

// mpirun across the namespaces over the delayed network: the golden matches, and the ranks' own
// traffic crossed the relay (tiny-v2 at mp4 moves ~1.1 MB between the two pairs; had Open MPI
// joined the "machines" by shared memory only its daemons' few KB would cross).
TEST(GoldenTwoHost, EvalMp4WithMpirunAcrossADelayedNetwork) {
  std::string err;
  eval_across_two_hosts(
      "mpirun",
      "TWO_HOST_DELAY_US=200 TWO_HOST_RATE=1gbit TWO_HOST_RELAY_REPORT=1 NET_DELAY=" +
          std::string(DSINFER_NET_DELAY_BIN),
      &err);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(err, m, std::regex(R"(net_delay: \S+ -> \S+: \d+ packets, (\d+) bytes)")))
      << err;
  EXPECT_GT(std::stoll(m[1]), 500000) << "bytes relayed from the first namespace to the second";
}

}  // namespace
}  // namespace dsinfer::golden_two_host_test
