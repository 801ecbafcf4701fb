// The gloo backend (torchrun-style launch: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT). Debian's
// gloo has no TCP store, so rank 0 serves a tiny key-value store for the rendezvous; everything
// after that is gloo's TCP transport. Buffers are fp32 (no bfloat16 in this gloo). Every wait is
// bounded by DSINFER_COMM_TIMEOUT except broadcasts of rank 0's input; a peer that dies is noticed
// at once, since its sockets close.
#ifdef DSINFER_HAVE_GLOO
#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#endif

#include "comm/backends.h"
#include "comm/gloo_allreduce.h"
#include "core/error.h"

namespace dsinfer {

#ifndef DSINFER_HAVE_GLOO

bool gloo_built() { return false; }

std::unique_ptr<Comm> make_gloo_comm() {
  fail(
      "dsinfer was built without the gloo backend (apt-get install libgloo-dev, then build with "
      "-DDSINFER_GLOO=ON, the default); "
      "start the ranks with mpirun or `dsinfer run -n N --comm mpi`");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr int kDefaultTimeoutSeconds = 600;
// Broadcasts carry rank 0's input, which waits for a person: no timeout (a dead peer still ends
// them, since its connections close).
constexpr milliseconds kNoTimeout = std::chrono::hours(100);

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int env_int(const char* name, const std::string& fallback = "") {
  std::string v = env(name);
  if (v.empty()) v = fallback;
  check(!v.empty(), name,
        " is not set (the gloo backend needs WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT)");
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  check(end != v.c_str() && *end == '\0' && n >= 0, name, "=", v, " is not a non-negative integer");
  return static_cast<int>(n);
}

// DSINFER_COMM_TIMEOUT seconds: how long the rendezvous waits for every rank and a collective
// for a peer that stopped answering (a peer that died is noticed at once: its sockets close).
milliseconds comm_timeout() {
  const std::string v = env("DSINFER_COMM_TIMEOUT");
  if (v.empty()) return std::chrono::seconds(kDefaultTimeoutSeconds);
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  check(end != v.c_str() && *end == '\0' && s > 0 && s < 1e6, "DSINFER_COMM_TIMEOUT=", v,
        " is not a positive number of seconds");
  return milliseconds(static_cast<int64_t>(s * 1000));
}

// DSINFER_GLOO_ALLREDUCE: the all_reduce algorithm (gloo_allreduce.h; default auto).
GlooAllreduce allreduce_choice() {
  const std::string v = env("DSINFER_GLOO_ALLREDUCE");
  return v.empty() ? GlooAllreduce::kAuto : parse_gloo_allreduce(v);
}

std::string seconds_text(milliseconds t) {
  std::ostringstream out;
  out << static_cast<double>(t.count()) / 1000 << " s";
  return out.str();
}

bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k, n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k, n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_str(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return send_all(fd, &n, 4) && send_all(fd, s.data(), n);
}

bool recv_str(int fd, std::string& s) {
  uint32_t n = 0;
  if (!recv_all(fd, &n, 4)) return false;
  s.resize(n);
  return recv_all(fd, s.data(), n);
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  check(rc == 0 && res, "gloo: cannot resolve MASTER_ADDR=", host, ": ", gai_strerror(rc));
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Rank 0's key-value store. Requests: 'S' key value sets (answered by one byte); 'A' key value
// sets only an absent key (answers 1, or 0 and the value already there); 'G' key timeout_ms waits
// for the key (answers 1 and its value, or 0 and nothing on timeout); 'C' prefix answers how many
// keys start with prefix, as text.
class StoreServer {
 public:
  explicit StoreServer(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    check(fd_ >= 0, "gloo store: socket: ", std::strerror(errno));
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 128) != 0) {
      const int err = errno;
      close(fd_);
      fail("gloo store: cannot listen on port ", port, ": ", std::strerror(err),
           " (set MASTER_PORT or DSINFER_STORE_PORT to a free port)");
    }
    state_ = std::make_shared<State>();
    std::thread([fd = fd_, st = state_] {
      for (;;) {
        const int c = accept(fd, nullptr, nullptr);
        if (c < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          return;
        }
        std::thread([c, st] {
          serve(c, *st);
          close(c);
        }).detach();
      }
    }).detach();
  }
  ~StoreServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::string> kv;
  };
  static void serve(int c, State& st) {
    for (;;) {
      char op = 0;
      std::string key, value;
      if (!recv_all(c, &op, 1) || !recv_str(c, key)) return;
      if (op == 'S' || op == 'A') {
        if (!recv_str(c, value)) return;
        char ok = 1;
        std::string old;
        {
          std::lock_guard<std::mutex> lock(st.mu);
          auto [it, added] = st.kv.try_emplace(key, value);
          if (!added && op == 'A') ok = 0, old = it->second;
          if (!added && op == 'S') it->second = value;
        }
        st.cv.notify_all();
        if (!send_all(c, &ok, 1) || (op == 'A' && !send_str(c, old))) return;
      } else if (op == 'G') {
        uint64_t ms = 0;
        if (!recv_all(c, &ms, 8)) return;
        std::unique_lock<std::mutex> lock(st.mu);
        const bool found =
            st.cv.wait_for(lock, milliseconds(ms), [&] { return st.kv.count(key) > 0; });
        if (found) value = st.kv[key];
        lock.unlock();
        const char ok = found ? 1 : 0;
        if (!send_all(c, &ok, 1) || !send_str(c, value)) return;
      } else if (op == 'C') {
        size_t n = 0;
        {
          std::lock_guard<std::mutex> lock(st.mu);
          for (auto it = st.kv.lower_bound(key); it != st.kv.end() && it->first.rfind(key, 0) == 0;
               ++it)
            ++n;
        }
        if (!send_str(c, std::to_string(n))) return;
      } else {
        return;
      }
    }
  }
  int fd_ = -1;
  std::shared_ptr<State> state_;
};

// A connection to rank 0's store; `where` (MASTER_ADDR:port) goes into every error.
class ClientStore : public gloo::rendezvous::Store {
 public:
  ClientStore(const std::string& host, int port, milliseconds timeout)
      : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
    const sockaddr_in addr = resolve(host, port);
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      check(fd_ >= 0, "gloo store: socket: ", std::strerror(errno));
      if (connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
      const int err = errno;
      close(fd_);
      fd_ = -1;
      if (Clock::now() >= deadline)
        throw CommError(cat("gloo: rendezvous timed out after ", seconds_text(timeout),
                            ": rank 0 never arrived (its store at MASTER_ADDR:MASTER_PORT = ",
                            where_, " did not answer: ", std::strerror(err),
                            "; check that rank 0 runs and that MASTER_ADDR and MASTER_PORT are the "
                            "same on every rank)"));
      std::this_thread::sleep_for(milliseconds(100));
    }
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~ClientStore() override {
    if (fd_ >= 0) close(fd_);
  }
  const std::string& where() const { return where_; }
  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::mutex> lock(mu_);
    char ok = 0;
    const char op = 'S';
    if (!send_all(fd_, &op, 1) || !send_str(fd_, key) ||
        !send_str(fd_, std::string(data.begin(), data.end())) || !recv_all(fd_, &ok, 1))
      lost("setting " + key);
  }
  // Sets an absent key: nullopt, or the value another process set first.
  std::optional<std::string> add(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    char ok = 0;
    const char op = 'A';
    std::string old;
    if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_str(fd_, value) ||
        !recv_all(fd_, &ok, 1) || !recv_str(fd_, old))
      lost("setting " + key);
    if (ok) return std::nullopt;
    return old;
  }
  // The value of key, waiting up to `wait` for it; nullopt on timeout.
  std::optional<std::string> get_within(const std::string& key, milliseconds wait) {
    std::lock_guard<std::mutex> lock(mu_);
    char ok = 0;
    const char op = 'G';
    const uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(0, wait.count()));
    std::string value;
    if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_all(fd_, &ms, 8) ||
        !recv_all(fd_, &ok, 1) || !recv_str(fd_, value))
      lost("waiting for " + key);
    if (!ok) return std::nullopt;
    return value;
  }
  size_t count(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    const char op = 'C';
    std::string n;
    if (!send_all(fd_, &op, 1) || !send_str(fd_, prefix) || !recv_str(fd_, n))
      lost("counting " + prefix);
    return static_cast<size_t>(std::stoul(n));
  }
  std::vector<char> get(const std::string& key) override {
    auto value = get_within(key, timeout_);
    if (!value)
      throw CommError(cat("gloo: rendezvous timed out after ", seconds_text(timeout_),
                          " waiting for '", key, "' in rank 0's store at ", where_));
    return std::vector<char>(value->begin(), value->end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const milliseconds&) override { wait(keys); }

 private:
  [[noreturn]] void lost(const std::string& doing) {
    throw CommError(cat("gloo: lost the connection to rank 0's store at ", where_, " while ", doing,
                        " (rank 0 died or exited)"));
  }
  std::string where_;
  milliseconds timeout_;
  int fd_ = -1;
  std::mutex mu_;
};

// The local address this host uses to reach MASTER_ADDR (no packet is sent).
std::string local_address_towards(const std::string& master) {
  sockaddr_in addr = resolve(master, 9);
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return master;
  std::string out = master;
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char buf[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) out = buf;
  }
  close(fd);
  return out;
}

// Every rank announces itself ("arrived/<rank>" = world size, host, pid) and waits for all the
// others, so a missing rank, a rank started twice or a different WORLD_SIZE is one clear error
// naming what arrived, instead of gloo's timeout on some address key.
void wait_for_every_rank(ClientStore& store, int rank, int world, milliseconds timeout) {
  const std::string me = cat(world, " ", host_name(), " pid ", getpid());
  if (auto other = store.add("arrived/" + std::to_string(rank), me))
    throw CommError(cat("gloo: rank ", rank, " was started twice (WORLD_SIZE, host, pid: ", *other,
                        " and ", me, "); give every process its own RANK"));
  const auto deadline = Clock::now() + timeout;
  for (int r = 0; r < world; ++r) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const auto value = store.get_within("arrived/" + std::to_string(r), left);
    if (!value) {
      const size_t arrived = store.count("arrived/");
      throw CommError(
          cat("gloo: rendezvous timed out after ", seconds_text(timeout), ": ", arrived, " of ",
              world, " ranks arrived at MASTER_ADDR:MASTER_PORT = ", store.where(), " (rank ", r,
              " did not; start every rank with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, "
              "or raise DSINFER_COMM_TIMEOUT)"));
    }
    const int theirs = std::atoi(value->c_str());
    if (theirs != world)
      throw CommError(cat("gloo: rank ", r, " was started with WORLD_SIZE=", theirs, ", rank ",
                          rank, " with ", world, "; every rank needs the same WORLD_SIZE"));
  }
}

class GlooComm : public Comm {
 public:
  GlooComm() {
    // gloo writes to its peers with writev(), which raises SIGPIPE when a peer has died; the
    // default action would kill this rank without a word instead of letting the write fail
    // and guard() name the lost rank.
    std::signal(SIGPIPE, SIG_IGN);
    world_ = env_int("WORLD_SIZE");
    rank_ = env_int("RANK");
    check(world_ >= 1 && rank_ < world_, "gloo: RANK=", rank_, " is not below WORLD_SIZE=", world_);
    timeout_ = comm_timeout();
    const GlooAllreduce allreduce =
        allreduce_choice();  // a bad value is named before the rendezvous
    std::string master = env("MASTER_ADDR");
    if (master.empty()) master = "127.0.0.1";
    int port = env_int("MASTER_PORT", "29500");
    if (env("TORCHELASTIC_USE_AGENT_STORE") == "True")
      port += 1;  // torchrun's agent holds MASTER_PORT
    if (!env("DSINFER_STORE_PORT").empty()) port = env_int("DSINFER_STORE_PORT");
    try {
      if (rank_ == 0) server_ = std::make_unique<StoreServer>(port);
      ClientStore store(master, port, timeout_);
      wait_for_every_rank(store, rank_, world_, timeout_);
      gloo::transport::tcp::attr attr;
      if (const std::string iface = env("DSINFER_GLOO_IFACE"); !iface.empty())
        attr.iface = iface;
      else
        attr.hostname = local_address_towards(master);
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, world_);
      ctx->setTimeout(timeout_);
      ctx->connectFullMesh(store, device);
      ctx_ = ctx;
      // The registered all_reduce objects get a context (connections) of their own: on a shared
      // one, the options API's large transfers run ~20x slower once one is registered.
      auto registered_ctx = std::make_shared<gloo::rendezvous::Context>(rank_, world_);
      registered_ctx->setTimeout(timeout_);
      gloo::rendezvous::PrefixStore registered_store("registered", store);
      registered_ctx->connectFullMesh(registered_store, device);
      allreducer_ = std::make_unique<GlooAllreducer>(ctx_, registered_ctx, timeout_, allreduce);
      barrier();  // nobody leaves the rendezvous (and rank 0 its store) before everyone is
                  // connected
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError(
          cat("gloo: rendezvous of rank ", rank_, " of ", world_, " failed: ", e.what()));
    }
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  const char* name() const override { return "gloo"; }

  void all_reduce_sum(float* data, int64_t n) override {
    if (n == 0) return;
    guard("all_reduce", [&] { allreducer_->run(data, n, next_tag()); });
  }
  void all_gather(const float* in, int64_t n, float* out) override {
    guard("all_gather", [&] {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in), static_cast<size_t>(n));
      opts.setOutput(out, static_cast<size_t>(n) * static_cast<size_t>(world_));
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }
  void broadcast(std::string& bytes, int root) override {
    broadcast_within(bytes, root, kNoTimeout);
  }
  std::vector<std::string> all_gather_bytes(const std::string& mine) override {
    std::vector<std::string> all(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) {
      std::string bytes = r == rank_ ? mine : std::string();
      broadcast_within(bytes, r, timeout_);
      all[static_cast<size_t>(r)] = std::move(bytes);
    }
    return all;
  }
  void barrier() override {
    guard("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  uint32_t next_tag() { return tag_++; }
  void broadcast_within(std::string& bytes, int root, milliseconds timeout) {
    check(root >= 0 && root < world_, "gloo: broadcast from rank ", root, " of ", world_);
    guard("broadcast", [&] {
      uint64_t size = bytes.size();
      {
        gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(&size, 1);
        opts.setRoot(root);
        opts.setTag(next_tag());
        opts.setTimeout(timeout);
        gloo::broadcast(opts);
      }
      bytes.resize(size);
      if (size == 0) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(reinterpret_cast<uint8_t*>(bytes.data()), size);
      opts.setRoot(root);
      opts.setTag(next_tag());
      opts.setTimeout(timeout);
      gloo::broadcast(opts);
    });
  }
  // gloo reports a lost peer by its socket address; with two ranks the peer is the other one.
  std::string peer_words() const {
    if (world_ == 2) return cat("rank ", 1 - rank_);
    return "another rank";
  }
  template <class F>
  void guard(const char* what, F&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      const std::string text = e.what();
      const bool timed_out =
          text.find("imeout") != std::string::npos || text.find("imed out") != std::string::npos;
      if (timed_out)
        throw CommError(cat("gloo ", what, " on rank ", rank_, " of ", world_, " timed out after ",
                            seconds_text(timeout_), ": ", peer_words(),
                            " stopped answering (DSINFER_COMM_TIMEOUT sets the limit): ", text));
      throw CommError(cat("gloo ", what, " on rank ", rank_, " of ", world_,
                          " lost its connection to ", peer_words(),
                          " (it died or exited): ", text));
    }
  }
  int world_ = 1, rank_ = 0;
  milliseconds timeout_{};
  uint32_t tag_ = 1;
  std::unique_ptr<StoreServer> server_;
  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<GlooAllreducer> allreducer_;
};

}  // namespace

bool gloo_built() { return true; }

std::unique_ptr<Comm> make_gloo_comm() { return std::make_unique<GlooComm>(); }

#endif

}  // namespace dsinfer
