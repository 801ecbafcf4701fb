// Tensor parallelism when something goes wrong: a rank killed mid-generation, a rank that never
// arrives, a rank given another checkpoint, a world size the shards were not made for, a missing
// shard. Each must end every surviving rank with one clear error and a non-zero exit within a
// bounded time (asserted), never a hang. Run per backend: mpi through mpirun (MPMD syntax for
// per-rank arguments), gloo through `dsinfer run --comm gloo` or as separate processes started
// here with the torchrun-style environment (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), which is how ranks on several machines meet: nobody kills the survivors for them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "parallel/free_port.h"
#include "test_support.h"

namespace dsinfer::mp_failure_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::data_path;

constexpr double kBoundSeconds = 60;  // generous: each failure below takes a few seconds

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A child process with stdin on a pipe (kept open until close_stdin) and stdout/stderr in files.
class Proc {
 public:
  Proc(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
       const std::string& dir) {
    out_ = dir + "/stdout";
    err_ = dir + "/stderr";
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      dup2(fds[0], STDIN_FILENO);
      close(fds[0]);
      close(fds[1]);
      const int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, STDOUT_FILENO);
      dup2(e, STDERR_FILENO);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(fds[0]);
    stdin_ = fds[1];
  }
  ~Proc() {
    close_stdin();
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // A job that already died makes this a failed write (EPIPE), not a SIGPIPE that kills the test.
  void write(const std::string& text) {
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(::write(stdin_, text.data(), text.size()), ssize_t(text.size())) << ::strerror(errno);
  }
  void close_stdin() {
    if (stdin_ >= 0) close(stdin_), stdin_ = -1;
  }
  bool running() {
    if (done_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
    done_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  // The exit status (128 + signal when killed), or -1 after timeout_s, when the process's
  // threads' stacks go to the test's output (a hang that happens once in many runs is then
  // diagnosable from the CI log alone).
  int wait(double timeout_s) {
    const auto start = Clock::now();
    while (since(start) < timeout_s) {
      if (!running()) return status_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    print_stacks();
    return -1;
  }
  void print_stacks() const {
    const std::string command = "gdb -p " + std::to_string(pid_) +
                                " -batch -ex 'thread apply all bt' 2>&1 | grep -v '^\\[New LWP'";
    std::printf("[ hang ] stacks of pid %d (gdb; Debian's gdb package):\n", pid_);
    std::fflush(stdout);
    if (std::system(command.c_str()) != 0) std::printf("[ hang ] gdb failed or is missing\n");
  }
  std::string out() const { return test::read_file(out_); }
  std::string err() const { return test::read_file(err_); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  bool done_ = false;
  int status_ = -1;
  std::string out_, err_;
};

bool wait_until(const std::function<bool()>& ready, double timeout_s) {
  const auto start = Clock::now();
  while (since(start) < timeout_s) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Ranks of one gloo job started here, each its own process with the torchrun-style environment.
std::vector<std::unique_ptr<Proc>> start_gloo_ranks(
    int world, const std::vector<int>& ranks,
    const std::function<std::vector<std::string>(int)>& args,
    const std::map<std::string, std::string>& extra_env = {}, int master_port = 0) {
  const std::string port = std::to_string(master_port ? master_port : pick_free_port());
  std::vector<std::unique_ptr<Proc>> procs;
  for (int rank : ranks) {
    std::map<std::string, std::string> env = {{"WORLD_SIZE", std::to_string(world)},
                                              {"RANK", std::to_string(rank)},
                                              {"LOCAL_RANK", std::to_string(rank)},
                                              {"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", port}};
    env.insert(extra_env.begin(), extra_env.end());
    std::vector<std::string> argv = {DSINFER_BIN, "--threads", "1"};
    for (const std::string& a : args(rank)) argv.push_back(a);
    static int started = 0;  // a directory per process, even for two with the same rank
    procs.push_back(std::make_unique<Proc>(
        argv, env,
        test::scratch_dir("rank" + std::to_string(rank) + "-" + std::to_string(started++))));
  }
  return procs;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t at = s.find(' ');; at = s.find(' ', start)) {
    if (at != start)
      words.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return words;
}

// ---------------------------------------------------------------- per backend, through launchers

class MpFailure : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (std::string why = test::backend_unavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(MpFailure, ThreeRanksOnTwoShardsFailOnEveryRank) {
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_ranks(
      GetParam(), 3,
      "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
      /*input=*/"", /*timeout_s=*/90);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_LT(r.seconds, kBoundSeconds);
  // Every rank reports the first rank's missing shard (the launcher may end the others before
  // they print, so only one message is certain).
  EXPECT_CONTAINS(r.err, "rank 0 of 3 failed to load the model: missing shard " + ckpt +
                             "/model0-mp3.safetensors");
  EXPECT_CONTAINS(r.err, "shard sets mp2");
}

TEST_P(MpFailure, RankWithoutItsShardEndsTheJob) {
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  std::remove((ckpt + "/model1-mp2.safetensors").c_str());
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_ranks(
      GetParam(), 2,
      "eval --ckpt-path " + ckpt + " --case " + golden + "/ref-mp2-fp32.json --out " + out,
      /*input=*/"", /*timeout_s=*/90);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_LT(r.seconds, kBoundSeconds);
  EXPECT_CONTAINS(r.err, "rank 1 of 2 failed to load the model: missing shard " + ckpt +
                             "/model1-mp2.safetensors for rank 1 of world size 2");
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpFailure, ::testing::Values("mpi", "gloo"),
                         [](const auto& info) { return test::backend_test_name(info.param); });

// ---------------------------------------------------------------- a rank with another checkpoint

// tiny-v2 mp2 on rank 0 and tiny-v2-lite mp2 on rank 1: each shard matches its own config, so only
// comparing across ranks can find it. eval's arguments for `rank`.
std::string eval_args(const std::string& ckpt, const std::string& out,
                      const std::string& extra = "") {
  return "eval --ckpt-path " + ckpt + " --case " + data_path("golden/tiny-v2/ref-mp2-fp32.json") +
         " --out " + out + extra;
}

TEST(MpFailureGloo, RankWithAnotherCheckpointStopsEveryRank) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string v2 = test::convert_golden("tiny-v2", 2),
                    lite = test::convert_golden("tiny-v2-lite", 2);
  const std::string out = test::scratch_dir("out");
  for (const bool same_config : {false, true}) {
    SCOPED_TRACE(same_config ? "both ranks given tiny-v2's config"
                             : "each rank its checkpoint's config");
    const std::string extra = same_config ? " --config " + v2 + "/config.json" : "";
    const auto start = Clock::now();
    auto ranks =
        start_gloo_ranks(2, {0, 1},
                         [&](int rank) {
                           return split_words(eval_args(
                               rank == 0 ? v2 : lite, out + "/eval" + std::to_string(rank), extra));
                         },
                         {{"DSINFER_COMM_TIMEOUT", "30"}});
    for (int rank = 0; rank < 2; ++rank) {
      auto& p = *ranks[static_cast<size_t>(rank)];
      EXPECT_EQ(p.wait(kBoundSeconds), 1) << "rank " << rank << ":\n" << p.err();
      const std::string err = p.err();
      // the same message on every rank, naming both ranks' files
      EXPECT_CONTAINS(
          err, "error: rank 1 loaded a different checkpoint or config than rank 0 (rank 0: " + v2 +
                   "/model0-mp2.safetensors with config " + v2 + "/config.json");
      EXPECT_CONTAINS(err, "rank 1: " + lite + "/model1-mp2.safetensors with config " +
                               (same_config ? v2 : lite) + "/config.json");
      EXPECT_CONTAINS(err, same_config ? "the shards' tensors"
                                       : "the configs differ: dim=256 against dim=128 on rank 1");
    }
    EXPECT_LT(since(start), kBoundSeconds);
  }
}

// Rank 0's rendezvous store is open to the network until the ranks meet. The probe's 5 bytes ('S'
// and a length of 0xFFFFFFFF) aborted rank 0 (std::bad_alloc in the store's thread); an HTTP
// request is another stranger. Each connection is closed with a warning, and the job goes on.
TEST(MpFailureGloo, AStrangerAtTheStorePortDoesNotStopTheJob) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string ckpt = test::convert_golden("tiny-v2", 2);
  const std::string out = test::scratch_dir("out");
  const int port = pick_free_port();
  auto args = [&](int rank) {
    return split_words(eval_args(ckpt, out + "/eval" + std::to_string(rank)));
  };
  const std::map<std::string, std::string> env = {{"DSINFER_COMM_TIMEOUT", "30"}};
  auto rank0 = start_gloo_ranks(2, {0}, args, env, port);
  auto poke = [&](const std::string& bytes) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool sent =
        connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    if (sent) {
      char c;
      recv(fd, &c, 1, 0);  // the store closes the connection
    }
    close(fd);
    return sent;
  };
  ASSERT_TRUE(wait_until([&] { return poke(std::string("S\xff\xff\xff\xff", 5)); }, 20))
      << "rank 0's store never listened:\n"
      << rank0[0]->err();
  EXPECT_TRUE(poke("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto rank1 = start_gloo_ranks(2, {1}, args, env, port);
  EXPECT_EQ(rank0[0]->wait(kBoundSeconds), 0) << rank0[0]->err();
  EXPECT_EQ(rank1[0]->wait(kBoundSeconds), 0) << rank1[0]->err();
  EXPECT_CONTAINS(rank0[0]->err(), "warning: gloo store on port " + std::to_string(port) +
                                       ": closed a connection from 127.0.0.1");
  EXPECT_CONTAINS(rank0[0]->err(), "it is not a dsinfer rank");
}

// serve at world size 2 when rank 1 dies (SIGKILL): rank 0 used to abort on its next step
// (CommError escaping the engine thread) and said "ok" on /health until then. Now a stream in
// flight ends with an error event naming the failure, and rank 0 exits 1 with an `error:` line
// within seconds, also when idle (its heartbeat finds the dead rank).
TEST(MpFailureGloo, ServeEndsItsStreamsAndExitsWhenARankDies) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string ckpt = test::convert_golden("tiny-v3-story", 2, /*with_tokenizer=*/true);
  for (const bool in_flight : {true, false}) {
    SCOPED_TRACE(in_flight ? "a stream in flight" : "idle");
    const int http_port = pick_free_port();
    auto ranks =
        start_gloo_ranks(2, {0, 1},
                         [&](int) {
                           return std::vector<std::string>{"serve", "--ckpt-path", ckpt, "--port",
                                                           std::to_string(http_port)};
                         },
                         {{"DSINFER_COMM_TIMEOUT", "30"}});
    httplib::Client client("127.0.0.1", http_port);
    client.set_read_timeout(60, 0);
    ASSERT_TRUE(wait_until(
        [&] {
          auto r = client.Get("/health");
          return r && r->status == 200;
        },
        kBoundSeconds))
        << ranks[0]->err();
    std::future<httplib::Result> stream;
    if (in_flight) {
      const std::string body =
          R"({"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":15000,)"
          R"("ignore_eos":true,"stream":true})";
      stream = std::async(std::launch::async, [&] {
        httplib::Client c("127.0.0.1", http_port);
        c.set_read_timeout(60, 0);
        return c.Post("/v1/chat/completions", body, "application/json");
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    const auto killed = Clock::now();
    kill(ranks[1]->pid(), SIGKILL);
    EXPECT_EQ(ranks[0]->wait(20), 1) << ranks[0]->err();
    EXPECT_LT(since(killed), 20);
    EXPECT_CONTAINS(ranks[0]->err(), "error: a rank failed: gloo");
    if (in_flight) {
      auto r = stream.get();
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      EXPECT_CONTAINS(r->body, "\"error\"");
      EXPECT_CONTAINS(r->body, "a rank failed");
    }
  }
}

// generate checks the prompts' token ids against the vocabulary; with ranks it must do so only
// after they agreed on the config, else a rank with a smaller vocabulary fails alone on a token
// id and the other sees only a lost connection.
TEST(MpFailureGloo, GenerateWithAnotherVocabularyOnOneRankNamesTheCheckpoint) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string chat = test::convert_golden("tiny-v3-chat", 2, /*with_tokenizer=*/true);
  const std::string v3 = test::convert_golden("tiny-v3", 2);  // same layers, 2048-token vocabulary
  const std::string prompts = test::scratch_dir("prompts") + "/prompts.txt";
  test::write_file(prompts, "Tell me a story about the sea.\n");
  auto ranks =
      start_gloo_ranks(2, {0, 1},
                       [&](int rank) {
                         return split_words("generate --ckpt-path " + chat + " --input-file " +
                                            prompts + " --max-new-tokens 2" +
                                            (rank == 1 ? " --config " + v3 + "/config.json" : ""));
                       },
                       {{"DSINFER_COMM_TIMEOUT", "30"}});
  for (int rank = 0; rank < 2; ++rank) {
    auto& p = *ranks[static_cast<size_t>(rank)];
    EXPECT_EQ(p.wait(kBoundSeconds), 1) << "rank " << rank << ":\n" << p.err();
    EXPECT_CONTAINS(p.err(), "error: rank 1 loaded a different checkpoint or config than rank 0");
    EXPECT_CONTAINS(p.err(), "vocab_size=129280 against vocab_size=2048");
  }
}

TEST(MpFailureMpi, RankWithAnotherCheckpointStopsTheJob) {
  if (std::string why = test::backend_unavailable("mpi"); !why.empty()) GTEST_SKIP() << why;
  const std::string v2 = test::convert_golden("tiny-v2", 2),
                    lite = test::convert_golden("tiny-v2-lite", 2);
  const std::string out = test::scratch_dir("out");
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string bin = std::string(DSINFER_BIN) + " --threads 1 ";
  // MPMD: one command line per rank
  auto r = test::run_command("timeout 90 mpirun --oversubscribe --bind-to none -n 1 " + bin +
                             eval_args(v2, out + "/eval0") + " : -n 1 " + bin +
                             eval_args(lite, out + "/eval1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out:\n" << r.err;
  EXPECT_LT(r.seconds, kBoundSeconds);
  EXPECT_CONTAINS(r.err, "rank 1 loaded a different checkpoint or config than rank 0 (rank 0: " +
                             v2 + "/model0-mp2.safetensors with config " + v2 + "/config.json");
  EXPECT_CONTAINS(r.err, "rank 1: " + lite + "/model1-mp2.safetensors");
  EXPECT_CONTAINS(r.err, "the configs differ: dim=256 against dim=128 on rank 1");
}

// ---------------------------------------------------------------- a rank that never arrives (gloo)

TEST(MpFailureGloo, MissingRankIsARendezvousTimeout) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/tiny-v3");
  // eval reads the config and the case, then meets the other ranks before touching any shard
  const std::string args = "eval --ckpt-path " + test::scratch_dir("none") + " --config " + golden +
                           "/hf/config.json --case " + golden + "/ref-mp2-fp32.json --out " +
                           test::scratch_dir("out") + "/eval";
  for (const int present : {0, 1}) {
    SCOPED_TRACE("only rank " + std::to_string(present) + " started");
    const auto start = Clock::now();
    auto ranks = start_gloo_ranks(2, {present}, [&](int) { return split_words(args); },
                                  {{"DSINFER_COMM_TIMEOUT", "2"}});
    auto& p = *ranks[0];
    EXPECT_EQ(p.wait(kBoundSeconds), 1) << p.err();
    EXPECT_LT(since(start), 30);
    const std::string err = p.err();
    EXPECT_CONTAINS(err, "error: gloo: rendezvous timed out after 2 s: ");
    if (present == 0)
      EXPECT_CONTAINS(err, "1 of 2 ranks arrived at MASTER_ADDR:MASTER_PORT = 127.0.0.1:");
    else
      EXPECT_CONTAINS(err,
                      "rank 0 never arrived (its store at MASTER_ADDR:MASTER_PORT = 127.0.0.1:");
  }
}

// Ranks that disagree on the launch itself: a rank started twice, different WORLD_SIZEs, a bad
// DSINFER_COMM_TIMEOUT.
TEST(MpFailureGloo, InconsistentLaunchesAreClearErrors) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string golden = data_path("golden/tiny-v3");
  const std::string args = "eval --ckpt-path " + test::scratch_dir("none") + " --config " + golden +
                           "/hf/config.json --case " + golden + "/ref-mp2-fp32.json --out " +
                           test::scratch_dir("out") + "/eval";
  auto words = [&](int) { return split_words(args); };
  {
    auto ranks = start_gloo_ranks(3, {0, 1, 1}, words, {{"DSINFER_COMM_TIMEOUT", "5"}});
    std::string errs;
    for (auto& p : ranks) {
      EXPECT_EQ(p->wait(kBoundSeconds), 1);
      errs += p->err();
    }
    EXPECT_CONTAINS(errs, "gloo: rank 1 was started twice");
  }
  {
    const int port = pick_free_port();  // one job, but rank 1 believes the world has 3 ranks
    auto two = start_gloo_ranks(2, {0}, words, {{"DSINFER_COMM_TIMEOUT", "5"}}, port);
    auto three = start_gloo_ranks(3, {1}, words, {{"DSINFER_COMM_TIMEOUT", "5"}}, port);
    EXPECT_EQ(two[0]->wait(kBoundSeconds), 1);
    EXPECT_EQ(three[0]->wait(kBoundSeconds), 1);
    EXPECT_CONTAINS(two[0]->err(), "gloo: rank 1 was started with WORLD_SIZE=3, rank 0 with 2");
    EXPECT_CONTAINS(three[0]->err(), "gloo: rank 0 was started with WORLD_SIZE=2, rank 1 with 3");
  }
  {
    auto ranks = start_gloo_ranks(2, {0}, words, {{"DSINFER_COMM_TIMEOUT", "soon"}});
    EXPECT_EQ(ranks[0]->wait(kBoundSeconds), 1);
    EXPECT_CONTAINS(ranks[0]->err(),
                    "DSINFER_COMM_TIMEOUT=soon is not a positive number of seconds");
  }
}

// ---------------------------------------------------------------- a rank killed mid-generation

// Interactive generate at 2 ranks: after one full turn, a second prompt starts generating and
// rank 1 is killed; a third prompt follows, so the survivor must notice in a collective (the
// generation, or the broadcast of the next prompt) with its stdin still open, not at its end.
struct KillPlan {
  std::string ckpt;
  std::string args;
};

KillPlan kill_plan() {
  const std::string ckpt = test::convert_golden("tiny-v3-chat", 2, /*with_tokenizer=*/true);
  return {ckpt,
          "generate --ckpt-path " + ckpt + " --interactive --max-new-tokens 200 --temperature 0"};
}

// Drives the session on `job` (rank 0's stdin); `kill_rank1` kills rank 1. Returns the moment of
// the kill.
Clock::time_point drive_and_kill(Proc& job, const std::function<void()>& kill_rank1) {
  job.write("Hello\n");
  EXPECT_TRUE(wait_until([&] { return count_of(job.out(), ">>> ") >= 2 || !job.running(); },
                         kBoundSeconds) &&
              job.running())
      << "first turn never finished:\n"
      << job.out() << job.err();
  const size_t before = job.out().size();
  job.write("Tell me a long story about the sea.\n");
  wait_until([&] { return job.out().size() > before; }, 5);  // generation started (or already done)
  kill_rank1();
  const auto killed = Clock::now();
  job.write("And another one.\n");
  return killed;
}

// The pid of the process below `ancestor` whose environment has `marker`.
pid_t descendant_with_env(pid_t ancestor, const std::string& marker) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = test::read_file(entry.path().string() + "/environ");
    if (env.find(std::string(1, '\0') + marker + '\0') == std::string::npos &&
        env.rfind(marker + '\0', 0) != 0)
      continue;
    for (pid_t p = std::stoi(name); p > 1;) {  // walk up the parents
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string pid_, comm, state;
      pid_t parent = 0;
      stat >> pid_ >> comm >> state >> parent;
      if (parent == ancestor) return std::stoi(name);
      p = parent;
    }
  }
  return -1;
}

TEST(MpFailureGloo, RankKilledMidGenerationEndsTheSurvivor) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const KillPlan plan = kill_plan();
  auto ranks = start_gloo_ranks(2, {0, 1}, [&](int) { return split_words(plan.args); });
  const auto killed = drive_and_kill(*ranks[0], [&] { kill(ranks[1]->pid(), SIGKILL); });
  const int status = ranks[0]->wait(kBoundSeconds);
  const double seconds = since(killed);
  const std::string err = ranks[0]->err();
  EXPECT_EQ(status, 1) << err;
  EXPECT_LT(seconds, kBoundSeconds);
  EXPECT_CONTAINS(err, "error: gloo ");
  EXPECT_CONTAINS(err, " on rank 0 of 2 lost its connection to rank 1 (it died or exited)");
  EXPECT_EQ(ranks[1]->wait(5), 128 + SIGKILL);
  std::printf("[ failure ] gloo survivor ended %.2f s after rank 1 was killed\n", seconds);
}

TEST(MpFailureMpi, RankKilledMidGenerationEndsTheJob) {
  if (std::string why = test::backend_unavailable("mpi"); !why.empty()) GTEST_SKIP() << why;
  const KillPlan plan = kill_plan();
  std::vector<std::string> argv = {
      "mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", DSINFER_BIN, "--threads", "1"};
  for (const std::string& w : split_words(plan.args)) argv.push_back(w);
  Proc job(argv, {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}},
           test::scratch_dir("mpirun"));
  const auto killed = drive_and_kill(job, [&] {
    const pid_t rank1 = descendant_with_env(job.pid(), "OMPI_COMM_WORLD_RANK=1");
    ASSERT_GT(rank1, 0) << "rank 1 not found below mpirun";
    kill(rank1, SIGKILL);
  });
  const int status = job.wait(kBoundSeconds);
  const double seconds = since(killed);
  EXPECT_NE(status, 0) << job.err();
  EXPECT_NE(status, -1) << "still running:\n" << job.err();
  EXPECT_LT(seconds, kBoundSeconds);
  EXPECT_CONTAINS(job.err(), "rank 1");  // mpirun: "process rank 1 with PID ... exited on signal 9"
  std::printf("[ failure ] mpirun ended %.2f s after rank 1 was killed\n", seconds);
}

}  // namespace
}  // namespace dsinfer::mp_failure_test
