// dsinfer run -n N [--comm mpi|gloo] <subcommand> [args...]: a local launcher. With gloo it
// starts N child processes of this binary with the torchrun-style environment (WORLD_SIZE, RANK,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); rank 0 keeps this process's stdin, the
// others read /dev/null; stdout and stderr are shared. When one rank fails the others are ended
// (SIGTERM, then SIGKILL after a grace period) and run fails naming that rank. With mpi it hands
// over to `mpirun -n N --oversubscribe --bind-to none`, which forwards stdin to rank 0 itself.
// --bind numa|socket pins each rank to one NUMA node or socket and prefers its memory there
// (parallel/placement.h); under mpirun that is `--map-by numa --bind-to numa` (or socket).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/free_port.h"
#include "parallel/placement.h"

namespace dsinfer::cli {

namespace {

struct RunOptions {
  int ranks = 0;
  std::string comm;
  std::string bind = "none";
  std::vector<std::string> args;  // the subcommand and its arguments
};

constexpr int kGraceSeconds = 5;

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::string self_path() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  check(n > 0, "run: cannot resolve /proc/self/exe: ", std::strerror(errno));
  return std::string(buf.data(), static_cast<size_t>(n));
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

std::vector<char*> to_argv(std::vector<std::string>& words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return argv;
}

[[noreturn]] void run_mpirun(const RunOptions& o, const std::vector<std::string>& global) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  // no ptrace rights in containers: Open MPI's single-copy shared memory would fail
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  std::vector<std::string> words = {"mpirun", "-n", std::to_string(o.ranks), "--oversubscribe"};
  const BindMode bind = parse_bind_mode(o.bind);
  if (bind == BindMode::kNone) {
    words.insert(words.end(), {"--bind-to", "none"});
  } else {
    // Open MPI maps and binds itself; --report-bindings logs where each rank landed
    const std::string domain = bind_mode_name(bind);
    words.insert(words.end(), {"--map-by", domain, "--bind-to", domain, "--report-bindings"});
    log_info("run: --bind ", domain, ": mpirun --map-by ", domain, " --bind-to ", domain);
  }
  words.push_back(self_path());
  words.insert(words.end(), global.begin(), global.end());
  words.insert(words.end(), o.args.begin(), o.args.end());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> argv = to_argv(words);
  // mpirun stays our child: a SIGTERM to `run` reaches it as SIGUSR1, which Open MPI forwards to
  // every rank (it would answer SIGTERM itself by killing the job and exiting non-zero, though
  // serve's ranks had drained); serve takes SIGUSR1 as SIGTERM. Other commands end on it as they
  // would on SIGTERM. SIGINT goes to the terminal's whole process group: mpirun handles it.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGTERM);
  sigprocmask(SIG_BLOCK, &forwarded, nullptr);
  const pid_t mpirun = fork();
  check(mpirun >= 0, "run: fork failed: ", std::strerror(errno));
  if (mpirun == 0) {
    sigprocmask(SIG_UNBLOCK, &forwarded, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // `run` killed outright takes mpirun with it
    execvp("mpirun", argv.data());
    std::fprintf(stderr,
                 "error: run: cannot start mpirun (%s); install Open MPI (apt-get install "
                 "openmpi-bin libopenmpi-dev) or use --comm gloo\n",
                 std::strerror(errno));
    _exit(127);
  }
  signal(SIGINT, SIG_IGN);
  // the forwarding thread: SIGTERM (blocked here, so only sigwait takes it) becomes SIGUSR1
  std::thread([mpirun, forwarded] {
    for (;;) {
      int sig = 0;
      if (sigwait(&forwarded, &sig) == 0) kill(mpirun, SIGUSR1);
    }
  }).detach();
  int status = 0;
  while (waitpid(mpirun, &status, 0) < 0 && errno == EINTR) {
  }
  std::exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// Sends `sig` to every rank still running.
void signal_all(const std::vector<pid_t>& pids, int sig) {
  for (pid_t pid : pids)
    if (pid > 0) kill(pid, sig);
}

// Ends every rank still running: SIGTERM, then SIGKILL after the grace period.
void end_all(std::vector<pid_t>& pids) {
  signal_all(pids, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kGraceSeconds);
  bool killed = false;
  for (;;) {
    bool any = false;
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      int status = 0;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD))
        pid = -1;
      else
        any = true;
    }
    if (!any) return;
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      signal_all(pids, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// `run` inside a launched rank (`run -n 2 run -n 2 ...`, or under torchrun or mpirun) would start
// a world per outer rank, each answering the whole input: the output N times over, exit 0.
void check_not_launched() {
  for (const char* name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}) {
    const char* value = std::getenv(name);
    if (value && std::atoi(value) > 1)
      fail("run: this process is already one rank of a launched world (", name, "=", value,
           "): a `run` inside `run`, torchrun or mpirun would start a separate world per rank; "
           "launch the subcommand once, with one launcher");
  }
}

void run_local(const RunOptions& o, const std::vector<std::string>& global) {
  const std::string self = self_path();
  const std::string port = std::to_string(pick_free_port());
  std::vector<std::string> words = {self};
  words.insert(words.end(), global.begin(), global.end());
  words.insert(words.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv = to_argv(words);
  const BindMode bind = parse_bind_mode(o.bind);
  const char* sysfs = std::getenv("DSINFER_SYSFS_ROOT");  // a fake topology, for tests
  const Topology topology = read_topology(sysfs ? sysfs : "/sys");
  const std::vector<RankPlacement> placement = plan_placement(bind, o.ranks, topology);
  if (bind != BindMode::kNone) log_info("run: ", describe_placement(bind, placement, topology));
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  check(devnull >= 0, "run: cannot open /dev/null: ", std::strerror(errno));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(static_cast<size_t>(o.ranks), -1);
  const pid_t launcher = getpid();
  for (int rank = 0; rank < o.ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      end_all(pids);
      fail("run: cannot start rank ", rank, ": ", std::strerror(err));
    }
    if (pid == 0) {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      // a launcher killed outright (SIGKILL: no handler runs) takes its ranks with it instead of
      // leaving them to wait for each other forever; and if it died before this line, go now
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(1);
      if (const int err = apply_placement(placement[static_cast<size_t>(rank)]); err != 0) {
        std::fprintf(stderr, "error: run: cannot bind rank %d (--bind %s): %s\n", rank,
                     o.bind.c_str(), std::strerror(err));
        _exit(1);
      }
      if (rank != 0) dup2(devnull, STDIN_FILENO);
      setenv("WORLD_SIZE", std::to_string(o.ranks).c_str(), 1);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(o.ranks).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      if (!o.comm.empty()) setenv("DSINFER_COMM", o.comm.c_str(), 1);
      execv(self.c_str(), argv.data());
      std::fprintf(stderr, "error: run: cannot execute %s: %s\n", self.c_str(),
                   std::strerror(errno));
      _exit(127);
    }
    pids[static_cast<size_t>(rank)] = pid;
  }
  close(devnull);

  int running = o.ranks;
  std::string failure;
  while (running > 0) {
    if (g_signal != 0) {
      const int sig = g_signal;
      g_signal = 0;
      // passed on: ranks that handle it (serve drains and exits 0) end run with status 0; ranks
      // it kills are reported below as killed by it
      signal_all(pids, sig);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: none left
    }
    int rank = -1;
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] == pid) rank = static_cast<int>(i), pids[i] = -1;
    if (rank < 0) continue;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failure.empty()) {
      failure = "rank " + std::to_string(rank) + " of " + std::to_string(o.ranks) + " " +
                describe(status);
      end_all(pids);
      running = 0;
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  check(failure.empty(), "run: ", failure);
}

}  // namespace

Command register_run(CLI::App& app, const std::vector<std::string>& global_args) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "start N local ranks of a subcommand: `dsinfer run -n 2 generate ...` (torchrun-style "
      "environment "
      "for gloo; mpirun for mpi); rank 0 reads stdin, a failing rank ends them all");
  sub->add_option("-n,--nproc", o->ranks, "number of ranks")
      ->required()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--comm", o->comm, "backend of the ranks: mpi (via mpirun, the default) or gloo")
      ->check(CLI::IsMember({"mpi", "gloo"}));
  sub->add_option("--bind", o->bind,
                  "pin each rank to one NUMA node or socket, its memory preferred there: numa, "
                  "socket or none "
                  "(default none; a machine with one node binds nothing)")
      ->check(CLI::IsMember({"numa", "socket", "none"}));
  // everything from the first word run does not know (the subcommand) on belongs to the ranks
  sub->prefix_command();
  sub->footer(
      "Usage: dsinfer [--threads N] [-q] [--debug] run -n N [--comm mpi|gloo] [--bind "
      "numa|socket|none] SUBCOMMAND [ARGS...]");
  return {sub, [o, sub, &global_args] {
            RunOptions opts = *o;
            opts.args = sub->remaining();
            check(!opts.args.empty(),
                  "run: name the subcommand the ranks run, e.g. `dsinfer run -n 2 eval ...`");
            check_not_launched();
            if (opts.comm.empty()) opts.comm = "mpi";
            if (opts.comm == "mpi")
              run_mpirun(opts, global_args);
            else
              run_local(opts, global_args);
          }};
}

}  // namespace dsinfer::cli
