// `dsinfer run -n N <subcommand>`, the local launcher: the tiny-v3 mp2 golden through `run -n 2
// eval` reproduces the reference, a rank that fails ends the whole run quickly with a message that
// names it, and rank 0 gets the launcher's stdin (`run -n 2 generate --interactive`). The mpi path
// (mpirun) is skipped when mpirun is not installed; the torchrun-style path (gloo) is exercised for
// its process handling, which needs no collective backend.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::cli_run_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;

bool mpirun_installed() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

struct Timed {
  test::CommandResult r;
  double seconds = 0;
};

// `dsinfer --threads 1 run <args>` with `input` on stdin, killed after timeout_s.
Timed launch(const std::string& args, const std::string& input = "", int timeout_s = 120) {
  const std::string dir = test::scratch_dir("run");
  const std::string in = dir + "/stdin", out = dir + "/stdout", err = dir + "/stderr";
  test::write_file(in, input);
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + DSINFER_BIN +
                          " --threads 1 run " + args + " <" + in + " >" + out + " 2>" + err;
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Timed t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t.r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  t.r.out = test::read_file(out);
  t.r.err = test::read_file(err);
  return t;
}

TEST(CliRun, EvalAtTwoRanksMatchesTheMp2Golden) {
  if (!mpirun_installed())
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto t = launch("-n 2 eval --ckpt-path " + ckpt + " --case " + golden +
                  "/ref-mp2-fp32.json --out " + out);
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;

  test::expect_logits_match(out + ".safetensors", golden + "/ref-mp2-fp32.safetensors");
  const json expected = json::parse(test::read_file(golden + "/ref-mp2-fp32.json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

TEST(CliRun, MissingShardEndsTheRunInBoundedTime) {
  if (!mpirun_installed())
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  std::remove((ckpt + "/model1-mp2.safetensors").c_str());
  const std::string out = test::scratch_dir("out") + "/eval";
  auto t = launch(
      "-n 2 eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out, "",
      /*timeout_s=*/60);
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_NE(t.r.exit_code, 124) << "timed out:\n" << t.r.err;
  EXPECT_NE(t.r.err.find("missing shard " + ckpt + "/model1-mp2.safetensors"), std::string::npos)
      << t.r.err;
}

TEST(CliRun, InteractiveTurnsReachRankZero) {
  if (!mpirun_installed())
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/tiny-v3-chat");
  const json chat = json::parse(test::read_file(golden + "/chat-mp2-fp32.json"));
  const json turns = json::parse(test::read_file(golden + "/turns.json"));
  const std::string ckpt = test::convert_golden("tiny-v3-chat", 2, /*tokenizer=*/true);
  std::string input, expected;
  for (const json& turn : turns) input += turn.get<std::string>() + "\n";
  for (const json& turn : chat["interactive"]) {
    expected += ">>> ";
    if (turn.contains("completion")) expected += turn["completion"].get<std::string>() + "\n";
  }
  expected += ">>> ";  // the prompt that reads /exit
  auto t = launch("-n 2 generate --ckpt-path " + ckpt + " --interactive --max-new-tokens " +
                      std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0",
                  input);
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_EQ(t.r.out, expected);
}

// The torchrun-style path (--comm gloo): the launcher's own process handling. tokenize does not
// use the communicator, so every rank runs it on its own.
TEST(CliRunLocal, FailingRanksFailTheRunAndAreNamed) {
  const std::string dir = test::scratch_dir("env");
  auto t = launch("-n 3 --comm gloo tokenize --tokenizer-path " + dir + "/none --text hi", "", 60);
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_NE(t.r.exit_code, 124) << "timed out:\n" << t.r.err;
  EXPECT_NE(t.r.err.find("error: run: rank "), std::string::npos) << t.r.err;
  EXPECT_NE(t.r.err.find(" of 3 exited with status 1"), std::string::npos) << t.r.err;
}

TEST(CliRunLocal, OnlyRankZeroReadsTheInput) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  auto t = launch("-n 2 --comm gloo tokenize --tokenizer-path " + tok + " --input-file /dev/stdin",
                  "\"hi\"\n", 60);
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  auto one = test::run_dsinfer("tokenize --tokenizer-path " + tok + " --text hi");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(t.r.out, one.out);  // rank 1 read /dev/null: no line of its own
}

// The first lines of a shell script: a FIFO held open as rank 0's stdin (so it never ends until the
// script closes its fd 3; dsinfer does not inherit that fd) and
// `<prefix>dsinfer run -n 2 --comm gloo tokenize` reading it in the background (out, err in dir).
std::string blocked_tokenize_run(const std::string& dir, const std::string& tok,
                                 const std::string& prefix, const std::string& run_args = "") {
  return "mkfifo " + dir +
         "/fifo\n"
         "exec 3<>" +
         dir + "/fifo\n" + prefix + DSINFER_BIN + " --threads 1 run -n 2 --comm gloo " + run_args +
         "tokenize --tokenizer-path " + tok + " --input-file /dev/stdin <" + dir + "/fifo >" + dir +
         "/out 2>" + dir + "/err 3>&- &\n";
}

// A rank killed by a signal while another waits on its input: the run ends at once and says so.
TEST(CliRunLocal, RankKilledBySignalEndsTheRun) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  const std::string dir = test::scratch_dir("kill");
  const std::string script = dir + "/kill.sh";
  test::write_file(
      script,
      blocked_tokenize_run(dir, tok, "timeout 60 ") +
          "guard=$!\n"
          "sleep 2\n"
          "for launcher in $(ps -o pid= --ppid $guard); do\n"  // timeout's child: dsinfer run
          "  for p in $(ps -o pid= --ppid $launcher); do kill -KILL $p; done\n"  // its ranks
          "done\n"
          "wait $guard\n"
          "echo $? >" +
          dir + "/rc\n");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(("sh " + script).c_str()), 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string rc = test::read_file(dir + "/rc");
  const std::string err = test::read_file(dir + "/err");
  EXPECT_NE(rc, "0\n") << err;
  EXPECT_NE(rc, "124\n") << "timed out:\n" << err;
  EXPECT_LT(seconds, 30);
  EXPECT_NE(err.find("was killed by signal 9"), std::string::npos) << err;
}

// The launcher itself killed outright (SIGKILL: no handler of its own runs): its ranks go too,
// by the parent-death signal, instead of living on as orphans that wait for each other.
TEST(CliRunLocal, KillingTheLauncherEndsItsRanks) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  const std::string dir = test::scratch_dir("orphans");
  const std::string script = dir + "/kill.sh";
  test::write_file(
      script,
      blocked_tokenize_run(dir, tok, "") +
          "launcher=$!\n"
          "sleep 2\n"
          "ranks=$(ps -o pid= --ppid $launcher)\n"
          "echo $ranks | wc -w >" +
          dir +
          "/ranks\n"
          "kill -KILL $launcher\n"
          "for i in $(seq 50); do\n"
          "  alive=0; for p in $ranks; do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done\n"
          "  [ $alive -eq 0 ] && break; sleep 0.1\n"
          "done\n"
          "echo $alive >" +
          dir +
          "/alive\n"
          "for p in $ranks; do kill -KILL $p 2>/dev/null; done\n"  // whatever happens, leave none
          "exit 0\n");
  ASSERT_EQ(std::system(("sh " + script).c_str()), 0);
  // rank 0 waits on its stdin (held open); rank 1's stdin is /dev/null, so it may be done already
  EXPECT_NE(test::read_file(dir + "/ranks"), "0\n") << test::read_file(dir + "/err");
  EXPECT_EQ(test::read_file(dir + "/alive"), "0\n") << "ranks outlived their launcher";
}

TEST(CliRunLocal, SuccessfulRanksMakeASuccessfulRun) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  auto t = launch("-n 2 --comm gloo tokenize --tokenizer-path " + tok + " --text hi", "", 60);
  EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
  // both ranks print (tokenize does not use the communicator): two identical lines
  const size_t first = t.r.out.find('\n');
  ASSERT_NE(first, std::string::npos) << t.r.out;
  EXPECT_EQ(t.r.out.substr(0, first + 1), t.r.out.substr(first + 1)) << t.r.out;
}

// --bind on this machine: it runs, logs the placement, and a one-node machine binds nothing.
TEST(CliRunLocal, BindLogsThePlacement) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  for (const char* mode : {"numa", "socket", "none"}) {
    auto t = launch(std::string("-n 2 --comm gloo --bind ") + mode + " tokenize --tokenizer-path " +
                        tok + " --text hi",
                    "", 60);
    ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
    if (std::string(mode) != "none") {
      EXPECT_CONTAINS(t.r.err, std::string("run: --bind ") + mode + ": ");
      if (std::getenv("DSINFER_SYSFS_ROOT") == nullptr &&
          !fs::exists("/sys/devices/system/node/node1")) {
        EXPECT_CONTAINS(t.r.err, "nothing to bind");
      }
    }
  }
  if (mpirun_installed()) {  // under mpirun, Open MPI's own mapping and its report of the bindings
    auto t = launch("-n 2 --bind numa tokenize --tokenizer-path " + tok + " --text hi", "", 60);
    ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
    EXPECT_CONTAINS(t.r.err, "mpirun --map-by numa --bind-to numa");
    EXPECT_CONTAINS(t.r.err, "MCW rank 1");
  }
  auto bad = launch("-n 2 --comm gloo --bind cores tokenize --tokenizer-path " + tok + " --text hi",
                    "", 30);
  EXPECT_EQ(bad.r.exit_code, 1);
  EXPECT_CONTAINS(bad.r.err, "--bind");
}

// --bind socket on a machine that says it has two sockets (a fake sysfs of this machine's CPUs 0
// and 1, one NUMA node): rank 0 runs pinned to CPU 0, and the log says where each rank went.
TEST(CliRunLocal, BindPinsEachRankToItsDomain) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  const std::string tok = data_path("tokenizer/deepseek-v3");
  const std::string dir = test::scratch_dir("bind");
  const std::string sys = dir + "/sys/devices/system";
  fs::create_directories(sys + "/node/node0");
  test::write_file(sys + "/node/node0/cpulist", "0-1\n");
  for (int c : {0, 1}) {
    fs::create_directories(sys + "/cpu/cpu" + std::to_string(c) + "/topology");
    test::write_file(sys + "/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id",
                     std::to_string(c));
  }
  test::write_file(sys + "/cpu/online", "0-1\n");
  const std::string script = dir + "/bind.sh";
  test::write_file(
      script,
      blocked_tokenize_run(dir, tok, "DSINFER_SYSFS_ROOT=" + dir + "/sys ", "--bind socket ") +
          "launcher=$!\n"
          "sleep 2\n"
          "for p in $(ps -o pid= --ppid $launcher); do\n"  // rank 0 waits on the FIFO; rank 1 may
                                                           // be done
          "  grep Cpus_allowed_list /proc/$p/status >>" +
          dir +
          "/allowed\n"
          "done\n"
          "exec 3>&-\n"  // end of rank 0's input
          // at most 60 s; a run still going then is described (for the failure message) and ended
          "for i in $(seq 600); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done\n"
          "if kill -0 $launcher 2>/dev/null; then\n"
          "  ps -e -o pid,ppid,stat,wchan:24,args >" +
          dir +
          "/hung\n"
          "  for p in $(ps -o pid= --ppid $launcher) $launcher; do kill -KILL $p; done\n"
          "fi\n"
          "wait $launcher\n"
          "echo $? >" +
          dir + "/rc\n");
  ASSERT_EQ(std::system(("sh " + script).c_str()), 0);
  const std::string err = test::read_file(dir + "/err");
  EXPECT_EQ(test::read_file(dir + "/rc"), "0\n")
      << err << (fs::exists(dir + "/hung") ? test::read_file(dir + "/hung") : "");
  EXPECT_CONTAINS(err, "--bind socket: 1 NUMA node(s), 2 socket(s)");
  EXPECT_CONTAINS(err, "rank 0: cpus 0, memory node 0");
  EXPECT_CONTAINS(err, "rank 1: cpus 1, memory node 0");
  EXPECT_CONTAINS(test::read_file(dir + "/allowed"), "Cpus_allowed_list:\t0\n");
}

// `run` in a rank of `run` (PROBE-3 U12): was two worlds answering the input twice, exit 0.
TEST(CliRunLocal, ANestedLaunchIsAnError) {
  const std::string tok = data_path("tokenizer/deepseek-v3");
  auto t = launch(
      "-n 2 --comm gloo run -n 2 --comm gloo tokenize --tokenizer-path " + tok + " --text hi", "",
      60);
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_NE(t.r.exit_code, 124) << "timed out:\n" << t.r.err;
  EXPECT_NE(t.r.err.find("already one rank of a launched world (WORLD_SIZE=2)"), std::string::npos)
      << t.r.err;
  EXPECT_EQ(t.r.out, "") << "an inner world ran";
}

TEST(CliRunLocal, WithoutASubcommandIsAnError) {
  auto t = launch("-n 2 --comm gloo", "", 30);
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_NE(t.r.exit_code, 124);
}

}  // namespace
}  // namespace dsinfer::cli_run_test
