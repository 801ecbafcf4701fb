// The gloo backend (torchrun-style launch: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT). Debian's
// gloo has no TCP store, so rank 0 serves one for the rendezvous (comm/rendezvous_store.h), closed
// once the ranks have met (its connections live on as the ranks' watch lines, comm/peer_watch.h);
// everything else is gloo's TCP transport. Buffers are fp32 (no bfloat16 in this gloo). Every wait
// is bounded by DSINFER_COMM_TIMEOUT except broadcasts of rank 0's input; a peer that dies is
// noticed at once: gloo sees its sockets close, and the watch its line, where gloo misses it.
#ifdef DSINFER_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>
#endif

#include "comm/backends.h"
#include "comm/gloo_allreduce.h"
#include "comm/gloo_watched_buffer.h"
#include "comm/peer_watch.h"
#include "comm/rendezvous_store.h"
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

// gloo's view of the rendezvous store (comm/rendezvous_store.h).
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(StoreClient& client) : client_(client) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    client_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto value = client_.get_within(key, client_.timeout());
    if (!value)
      throw CommError(cat("gloo: rendezvous timed out after ", seconds_text(client_.timeout()),
                          " waiting for '", key, "' in rank 0's store at ", client_.where()));
    return std::vector<char>(value->begin(), value->end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const milliseconds&) override { wait(keys); }

 private:
  StoreClient& client_;
};

// Every rank announces itself ("arrived/<rank>" = world size, host, pid) and waits for all the
// others, so a missing rank, a rank started twice or a different WORLD_SIZE is one clear error
// naming what arrived, instead of gloo's timeout on some address key.
void wait_for_every_rank(StoreClient& store, int rank, int world, milliseconds timeout) {
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
    if (theirs != world) {
      // Both sides name the mismatch: this rank says it has seen it, and rank 0 (whose exit
      // closes the store) waits for the other's word first, else a slow rank 1 would find the
      // store gone and report a lost connection instead.
      try {
        store.set("mismatch-seen/" + std::to_string(rank), "1");
        if (rank == 0) store.get_within("mismatch-seen/" + std::to_string(r), timeout);
      } catch (const CommError&) {  // (the mismatch is the error to report)
      }
      throw CommError(cat("gloo: rank ", r, " was started with WORLD_SIZE=", theirs, ", rank ",
                          rank, " with ", world, "; every rank needs the same WORLD_SIZE"));
    }
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
    // (0 would listen on some free port nobody else knows; past 65535 wraps to another one)
    check(port >= 1 && port <= 65535, "gloo: the store's port ", port,
          " (MASTER_PORT, DSINFER_STORE_PORT) is not in [1, 65535]");
    try {
      if (rank_ == 0) server_ = std::make_unique<StoreServer>(master, port);
      StoreClient client(master, port, timeout_);
      wait_for_every_rank(client, rank_, world_, timeout_);
      GlooStore store(client);
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
      barrier();  // nobody leaves the rendezvous (and rank 0 its store) before everyone is
                  // connected
      // the store's connections become the watch lines; then its port closes
      std::map<int, int> lines;
      if (rank_ == 0 && world_ > 1) lines = server_->take_watch_lines(world_, timeout_);
      if (rank_ != 0) lines[0] = client.into_watch_line(rank_);
      server_.reset();
      watch_ = std::make_unique<PeerWatch>(std::move(lines));
      allreducer_ =
          std::make_unique<GlooAllreducer>(ctx_, registered_ctx, timeout_, allreduce, watch_.get());
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
    guard("all_gather", [&] { gather(in, n, out); });
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
  void expect_agreed_failure() override {
    if (watch_) watch_->expect_agreed_failure();
  }
  // An all_gather of one float: gloo's own barrier keeps its buffer to itself, so the watch could
  // not abort its sends.
  void barrier() override {
    guard("barrier", [&] {
      const float mine = 0;
      std::vector<float> all(static_cast<size_t>(world_));
      gather(&mine, 1, all.data());
    });
  }

 private:
  uint32_t next_tag() { return tag_++; }
  // gloo's allgather and broadcast on buffers the watch can end (comm/gloo_watched_buffer.h).
  void gather(const float* in, int64_t n, float* out) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput<float>(watched_buffer(*ctx_, const_cast<float*>(in), bytes, watch_.get()));
    opts.setOutput<float>(
        watched_buffer(*ctx_, out, bytes * static_cast<size_t>(world_), watch_.get()));
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  }
  void broadcast_bytes(void* data, size_t count, int root, milliseconds timeout) {
    gloo::BroadcastOptions opts(ctx_);
    opts.setOutput<uint8_t>(watched_buffer(*ctx_, data, count, watch_.get()));
    opts.setRoot(root);
    opts.setTag(next_tag());
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  }
  void broadcast_within(std::string& bytes, int root, milliseconds timeout) {
    check(root >= 0 && root < world_, "gloo: broadcast from rank ", root, " of ", world_);
    guard("broadcast", [&] {
      uint64_t size = bytes.size();
      broadcast_bytes(&size, sizeof size, root, timeout);
      bytes.resize(size);
      if (size > 0) broadcast_bytes(bytes.data(), size, root, timeout);
    });
  }
  // gloo reports a lost peer by its socket address; the watch knows the rank whose line ended,
  // and with two ranks the peer is the other one.
  std::string peer_words() const {
    if (watch_ && watch_->dead_rank() >= 0) return cat("rank ", watch_->dead_rank());
    if (world_ == 2) return cat("rank ", 1 - rank_);
    return "another rank";
  }
  template <class F>
  void guard(const char* what, F&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      const std::string text = e.what();
      if (watch_ && watch_->dead_rank() >= 0)  // (its aborted sends end in a gloo timeout)
        throw CommError(cat("gloo ", what, " on rank ", rank_, " of ", world_,
                            " lost its connection to ", peer_words(),
                            " (it died or exited): ", text));
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
  // last, so destroyed first: the goodbye goes out while gloo's connections are still open
  std::unique_ptr<PeerWatch> watch_;
};

}  // namespace

bool gloo_built() { return true; }

std::unique_ptr<Comm> make_gloo_comm() { return std::make_unique<GlooComm>(); }

#endif

}  // namespace dsinfer
