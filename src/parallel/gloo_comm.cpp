// The gloo backend (torchrun-style launch: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT). Debian's
// gloo has no TCP store, so rank 0 serves a tiny key-value store for the rendezvous; everything
// after that is gloo's TCP transport. Buffers are fp32 (no bfloat16 in this gloo).
#ifdef DSINFER_HAVE_GLOO
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#endif

#include "core/error.h"
#include "parallel/comm.h"

namespace dsinfer {

#ifndef DSINFER_HAVE_GLOO

std::unique_ptr<Comm> make_gloo_comm() {
  fail("dsinfer was built without the gloo backend (apt-get install libgloo-dev, cmake -DDSINFER_GLOO=ON); "
       "start the ranks with mpirun or `dsinfer run -n N --comm mpi`");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int env_int(const char* name, const std::string& fallback = "") {
  std::string v = env(name);
  if (v.empty()) v = fallback;
  check(!v.empty(), name, " is not set (the gloo backend needs WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT)");
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  check(end != v.c_str() && *end == '\0' && n >= 0, name, "=", v, " is not a non-negative integer");
  return static_cast<int>(n);
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

// Rank 0's key-value store: "S key value" sets (answered by one byte), "G key" waits for the key
// (up to the timeout) and answers with its value, or an empty reply with a leading 0 byte.
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
        std::thread([c, st] { serve(c, *st); close(c); }).detach();
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
      if (op == 'S') {
        if (!recv_str(c, value)) return;
        {
          std::lock_guard<std::mutex> lock(st.mu);
          st.kv[key] = value;
        }
        st.cv.notify_all();
        const char ok = 1;
        if (!send_all(c, &ok, 1)) return;
      } else if (op == 'G') {
        std::unique_lock<std::mutex> lock(st.mu);
        const bool found = st.cv.wait_for(lock, kTimeout, [&] { return st.kv.count(key) > 0; });
        if (found) value = st.kv[key];
        lock.unlock();
        const char ok = found ? 1 : 0;
        if (!send_all(c, &ok, 1) || !send_str(c, value)) return;
      } else {
        return;
      }
    }
  }
  int fd_ = -1;
  std::shared_ptr<State> state_;
};

class ClientStore : public gloo::rendezvous::Store {
 public:
  ClientStore(const std::string& host, int port) {
    const sockaddr_in addr = resolve(host, port);
    const auto deadline = Clock::now() + kTimeout;
    for (;;) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      check(fd_ >= 0, "gloo store: socket: ", std::strerror(errno));
      if (connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
      const int err = errno;
      close(fd_);
      fd_ = -1;
      if (Clock::now() >= deadline)
        throw CommError("gloo: rank 0's store at " + host + ":" + std::to_string(port) + " did not answer within " +
                        std::to_string(kTimeout.count()) + " s (" + std::strerror(err) + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{static_cast<time_t>(kTimeout.count() + 10), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~ClientStore() override {
    if (fd_ >= 0) close(fd_);
  }
  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::mutex> lock(mu_);
    char ok = 0;
    const char op = 'S';
    if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_str(fd_, std::string(data.begin(), data.end())) ||
        !recv_all(fd_, &ok, 1))
      throw CommError("gloo: lost rank 0's store while setting " + key);
  }
  std::vector<char> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    char ok = 0;
    const char op = 'G';
    std::string value;
    if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !recv_all(fd_, &ok, 1) || !recv_str(fd_, value))
      throw CommError("gloo: lost rank 0's store while waiting for " + key);
    if (!ok)
      throw CommError("gloo: rendezvous timed out after " + std::to_string(kTimeout.count()) + " s waiting for '" +
                      key + "': a rank never arrived (check WORLD_SIZE and that every rank was started)");
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
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

class GlooComm : public Comm {
 public:
  GlooComm() {
    world_ = env_int("WORLD_SIZE");
    rank_ = env_int("RANK");
    check(world_ >= 1 && rank_ < world_, "gloo: RANK=", rank_, " is not below WORLD_SIZE=", world_);
    std::string master = env("MASTER_ADDR");
    if (master.empty()) master = "127.0.0.1";
    int port = env_int("MASTER_PORT", "29500");
    if (env("TORCHELASTIC_USE_AGENT_STORE") == "True") port += 1;  // torchrun's agent holds MASTER_PORT
    if (!env("DSINFER_STORE_PORT").empty()) port = env_int("DSINFER_STORE_PORT");
    try {
      if (rank_ == 0) server_ = std::make_unique<StoreServer>(port);
      ClientStore store(master, port);
      gloo::transport::tcp::attr attr;
      if (const std::string iface = env("DSINFER_GLOO_IFACE"); !iface.empty())
        attr.iface = iface;
      else
        attr.hostname = local_address_towards(master);
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, world_);
      ctx->setTimeout(kTimeout);
      ctx->connectFullMesh(store, device);
      ctx_ = ctx;
      barrier();  // nobody leaves the rendezvous (and rank 0 its store) before everyone is connected
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError(std::string("gloo: rendezvous of rank ") + std::to_string(rank_) + " of " +
                      std::to_string(world_) + " failed: " + e.what());
    }
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  const char* name() const override { return "gloo"; }

  void all_reduce_sum(float* data, int64_t n) override {
    if (n == 0) return;
    guard("all_reduce", [&] {
      gloo::AllreduceOptions opts(ctx_);
      opts.setInput(data, static_cast<size_t>(n));
      opts.setOutput(data, static_cast<size_t>(n));
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(next_tag());
      gloo::allreduce(opts);
    });
  }
  void all_gather(const float* in, int64_t n, float* out) override {
    guard("all_gather", [&] {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in), static_cast<size_t>(n));
      opts.setOutput(out, static_cast<size_t>(n) * static_cast<size_t>(world_));
      opts.setTag(next_tag());
      gloo::allgather(opts);
    });
  }
  void broadcast(std::string& bytes, int root) override {
    guard("broadcast", [&] {
      uint64_t size = bytes.size();
      {
        gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(&size, 1);
        opts.setRoot(root);
        opts.setTag(next_tag());
        gloo::broadcast(opts);
      }
      bytes.resize(size);
      if (size == 0) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(reinterpret_cast<uint8_t*>(bytes.data()), size);
      opts.setRoot(root);
      opts.setTag(next_tag());
      gloo::broadcast(opts);
    });
  }
  void barrier() override {
    guard("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(next_tag());
      gloo::barrier(opts);
    });
  }

 private:
  uint32_t next_tag() { return tag_++; }
  template <class F>
  void guard(const char* what, F&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      throw CommError(std::string("gloo ") + what + " failed on rank " + std::to_string(rank_) +
                      " (another rank died or stopped answering): " + e.what());
    }
  }
  int world_ = 1, rank_ = 0;
  uint32_t tag_ = 1;
  std::unique_ptr<StoreServer> server_;
  std::shared_ptr<gloo::Context> ctx_;
};

}  // namespace

std::unique_ptr<Comm> make_gloo_comm() { return std::make_unique<GlooComm>(); }

#endif

}  // namespace dsinfer
