// net_delay: a one-way delay between two network namespaces, for the scale-out benchmark
// (bench/scale_out.sh). This kernel has no netem (and no fq or etf qdisc, so no departure-time
// pacing either), so the delay is a user-space relay: one TUN device in each namespace, and every
// packet read from one is written to the other `--delay-us` microseconds after it was read. Rates
// are limited by the kernel as usual (tc htb/tbf on the TUN devices).
//
//   net_delay --ns NS_A --ns NS_B --dev tun-a --dev tun-b --delay-us 50
//
// It makes the devices, prints "ready" on stdout once they exist (the caller then gives them
// addresses and brings them up), relays until SIGTERM/SIGINT, and prints per direction how many
// packets it relayed and how late they went out (the sleep's overshoot) on stderr. Root only. The
// delay is honest only while the relay's threads get a CPU when their timers fire: check it with a
// measured round trip (the script pings across before it benchmarks).
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "net_delay: %s\n", what.c_str());
  std::exit(1);
}

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// Opens a TUN device named `dev` inside network namespace `ns` (/var/run/netns/<ns>, as `ip netns
// add` makes it) and returns to this process's namespace.
int open_tun_in(const std::string& ns, const std::string& dev) {
  const int home = open("/proc/self/ns/net", O_RDONLY);
  const int target = open(("/var/run/netns/" + ns).c_str(), O_RDONLY);
  if (home < 0 || target < 0)
    die("cannot open network namespace " + ns + ": " + std::strerror(errno));
  if (setns(target, CLONE_NEWNET) != 0)
    die("setns " + ns + ": " + std::strerror(errno) + " (root needed)");
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) die(std::string("/dev/net/tun: ") + std::strerror(errno));
  ifreq req{};
  req.ifr_flags = IFF_TUN | IFF_NO_PI;
  if (dev.size() >= IFNAMSIZ) die("device name " + dev + " is too long");
  std::strncpy(req.ifr_name, dev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &req) != 0)
    die("TUNSETIFF " + dev + " in " + ns + ": " + std::strerror(errno));
  if (setns(home, CLONE_NEWNET) != 0) die(std::string("setns back: ") + std::strerror(errno));
  close(home);
  close(target);
  return fd;
}

std::atomic<bool> stopping{false};

struct Packet {
  int64_t due_ns;
  std::vector<char> bytes;
};

// One direction, one thread: ppoll on the source device until a packet arrives or the oldest held
// one is due (nanosecond timeouts, timer slack 1 ns), read everything that arrived (each stamped
// on its own arrival), write out whatever is due. One thread, so no hand-off between threads: on a
// VM every wake-up of an idle vCPU costs tens of microseconds, and a reader handing packets to a
// writer paid one per packet. Waits under kSpinNs are spun instead of slept for the same reason.
class Direction {
 public:
  Direction(int from, int to, int64_t delay_ns, std::string name)
      : from_(from), to_(to), delay_ns_(delay_ns), name_(std::move(name)) {}
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void join() { thread_.join(); }
  void report() const {
    const double mean =
        packets_ ? static_cast<double>(late_ns_) / static_cast<double>(packets_) / 1000 : 0;
    std::fprintf(
        stderr,
        "net_delay: %s: %lld packets, %lld bytes, sent %.1f us late on average, %.1f us at worst\n",
        name_.c_str(), static_cast<long long>(packets_), static_cast<long long>(bytes_), mean,
        static_cast<double>(worst_late_ns_) / 1000);
  }

 private:
  static constexpr int64_t kSpinNs = 15000;
  static constexpr int64_t kIdleNs = 200000000;  // wake now and then to notice a stop

  void loop() {
    std::vector<char> buf(65536);
    while (!stopping) {
      int64_t wait_ns = kIdleNs;
      if (!held_.empty()) wait_ns = std::max<int64_t>(0, held_.front().due_ns - now_ns());
      if (wait_ns > 0 && wait_ns < kSpinNs) {  // spin, watching for arrivals
        pollfd p{from_, POLLIN, 0};
        while (now_ns() < held_.front().due_ns && poll(&p, 1, 0) == 0) {
        }
      } else if (wait_ns > 0) {
        pollfd p{from_, POLLIN, 0};
        const int64_t sleep_ns =
            held_.empty() ? wait_ns : wait_ns - kSpinNs / 2;  // wake a little early
        timespec t{static_cast<time_t>(sleep_ns / 1000000000),
                   static_cast<long>(sleep_ns % 1000000000)};
        ppoll(&p, 1, &t, nullptr);
      }
      // everything that arrived, stamped now (non-blocking reads)
      while (true) {
        const ssize_t n = read(from_, buf.data(), buf.size());
        if (n <= 0) break;
        held_.push_back({now_ns() + delay_ns_, std::vector<char>(buf.begin(), buf.begin() + n)});
      }
      // everything due
      const int64_t now = now_ns();
      while (!held_.empty() && held_.front().due_ns <= now) {
        Packet& packet = held_.front();
        const int64_t late = now - packet.due_ns;
        if (write(to_, packet.bytes.data(), packet.bytes.size()) < 0 && errno != EIO)
          std::fprintf(stderr, "net_delay: %s: write: %s\n", name_.c_str(), std::strerror(errno));
        ++packets_;
        bytes_ += static_cast<int64_t>(packet.bytes.size());
        late_ns_ += late;
        worst_late_ns_ = std::max(worst_late_ns_, late);
        held_.pop_front();
      }
    }
  }
  int from_, to_;
  int64_t delay_ns_;
  std::string name_;
  std::deque<Packet> held_;  // in arrival order, hence in due order
  std::thread thread_;
  int64_t packets_ = 0, bytes_ = 0, late_ns_ = 0, worst_late_ns_ = 0;
};

void usage(int status) {
  std::fprintf(
      status ? stderr : stdout,
      "usage: net_delay --ns NS_A --ns NS_B --dev DEV_A --dev DEV_B --delay-us US\n"
      "Relays packets between a TUN device DEV_A in namespace NS_A and DEV_B in NS_B, each one\n"
      "US microseconds after it arrived (one-way delay; a round trip gains 2 x US). Prints\n"
      "\"ready\" once the devices exist; runs until SIGTERM or SIGINT. Root only.\n");
  std::exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> namespaces, devices;
  double delay_us = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    const std::string v = argv[++i];
    if (a == "--ns") {
      namespaces.push_back(v);
    } else if (a == "--dev") {
      devices.push_back(v);
    } else if (a == "--delay-us") {
      char* end = nullptr;
      delay_us = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end || delay_us < 0 || delay_us > 1e6)
        die("--delay-us " + v + " is not a number of microseconds in [0, 1e6]");
    } else {
      std::fprintf(stderr, "net_delay: unknown option %s\n", a.c_str());
      usage(2);
    }
  }
  if (namespaces.size() != 2 || devices.size() != 2 || delay_us < 0) usage(2);
  // timers fire when asked, not up to the default 50 us later
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int a = open_tun_in(namespaces[0], devices[0]);
  const int b = open_tun_in(namespaces[1], devices[1]);
  const auto delay_ns = static_cast<int64_t>(delay_us * 1000);
  Direction ab(a, b, delay_ns, namespaces[0] + " -> " + namespaces[1]);
  Direction ba(b, a, delay_ns, namespaces[1] + " -> " + namespaces[0]);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // the relay threads inherit the mask
  ab.start();
  ba.start();
  std::printf("ready\n");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  stopping = true;
  ab.join();
  ba.join();
  ab.report();
  ba.report();
  return 0;
}
