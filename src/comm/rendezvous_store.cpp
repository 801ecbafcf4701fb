#include "comm/rendezvous_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "parallel/comm.h"

namespace dsinfer {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string seconds_text(milliseconds t) {
  std::ostringstream out;
  out << static_cast<double>(t.count()) / 1000 << " s";
  return out.str();
}

// A signal handled in this process (libFuzzer's timer, a profiler's, one installed without
// SA_RESTART) interrupts a blocked send or recv with EINTR: that is no reason to lose the
// connection, so it is retried (a retried recv waits its SO_RCVTIMEO afresh).
bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_str(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return send_all(fd, &n, 4) && send_all(fd, s.data(), n);
}

// A string of at most kMaxStoreString bytes (`too_long` says when the length was past it: the
// length is the peer's word, and 4 GiB of it must not be allocated).
bool recv_str(int fd, std::string& s, bool* too_long = nullptr) {
  uint32_t n = 0;
  if (!recv_all(fd, &n, 4)) return false;
  if (n > kMaxStoreString) {
    if (too_long) *too_long = true;
    return false;
  }
  s.resize(n);
  return recv_all(fd, s.data(), n);
}

// Whether the peer of `fd` has closed or broken its side (no request waiting to be read).
bool peer_gone(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// Reads the peer's hello, giving up at the first byte that differs (a stranger's 5 bytes must
// not leave us waiting for 11 more). 1: it matched; 0: it differs; -1: the connection ended or
// timed out first.
int recv_hello(int fd) {
  char got[kStoreHelloSize];
  size_t have = 0;
  while (have < kStoreHelloSize) {
    const ssize_t k = ::recv(fd, got + have, kStoreHelloSize - have, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    if (std::memcmp(got + have, kStoreHello + have, static_cast<size_t>(k)) != 0) return 0;
    have += static_cast<size_t>(k);
  }
  return 1;
}

std::optional<in_addr> literal_ipv4(const std::string& host) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return std::nullopt;
  return a;
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

std::string peer_name(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  char buf[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return cat(buf, ":", ntohs(a.sin_port));
}

// A line per closed bad connection, the first few only: a flood must not flood the log too.
void warn_bad_connection(int port, int fd, const std::string& why) {
  static std::atomic<int> said{0};
  const int n = said.fetch_add(1);
  if (n < 5)
    log_line(LogLevel::kQuiet,
             cat("warning: gloo store on port ", port, ": closed a connection from ", peer_name(fd),
                 ": ", why, n == 4 ? " (no more of these)" : ""));
}

}  // namespace

struct StoreServer::State {
  int port = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> kv;
  std::map<int, int> watch_lines;   // rank -> socket, until take_watch_lines
  bool lines_taken = false;         // later lines are closed, not kept
  std::atomic<int> connections{0};  // being served (StoreServer::open_connections)
  ~State() {
    for (const auto& [rank, fd] : watch_lines) close(fd);
  }
};

namespace {

// One connection's requests, until it closes or breaks the protocol (`why` then says how).
// Returns whether the connection became a watch line (and so stays open).
bool serve_connection(int c, StoreServer::State& st, std::string& why);

}  // namespace

StoreServer::StoreServer(const std::string& host, int port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  check(fd_ >= 0, "gloo store: socket: ", std::strerror(errno));
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  // A host name may resolve here to a loopback alias (Debian's 127.0.1.1) while other machines
  // reach it by its real address, so only a literal address narrows the listening socket.
  const std::optional<in_addr> literal = literal_ipv4(host);
  bool narrowed = false;
  if (literal) {
    sockaddr_in only = addr;
    only.sin_addr = *literal;
    narrowed = bind(fd_, reinterpret_cast<sockaddr*>(&only), sizeof only) == 0;
  }
  if (!narrowed) {
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int err = errno;
      close(fd_);
      fail("gloo store: cannot listen on port ", port, ": ", std::strerror(err),
           " (set MASTER_PORT or DSINFER_STORE_PORT to a free port)");
    }
    log_info("gloo store: listening on every interface, port ", port, " (MASTER_ADDR=", host,
             literal ? " is not an address of this machine" : " is not a literal IPv4 address",
             "; it closes once the ranks have met)");
  }
  if (listen(fd_, 128) != 0) {
    const int err = errno;
    close(fd_);
    fail("gloo store: cannot listen on port ", port, ": ", std::strerror(err));
  }
  state_ = std::make_shared<State>();
  state_->port = port;
  std::thread([fd = fd_, st = state_] {
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // out of descriptors or memory for now: the ranks' connections wait in the backlog
          std::this_thread::sleep_for(milliseconds(10));
          continue;
        }
        return;  // the store was closed
      }
      std::thread([c, st] {
        struct Count {  // the connection is served for this thread's lifetime
          std::atomic<int>& n;
          explicit Count(std::atomic<int>& count) : n(count) { ++n; }
          ~Count() { --n; }
        } counted(st->connections);
        std::string why;
        bool kept = false;
        try {
          kept = serve_connection(c, *st, why);
        } catch (const std::exception& e) {  // never std::terminate from a stranger's bytes
          why = e.what();
        }
        if (kept) return;
        if (!why.empty()) warn_bad_connection(st->port, c, why);
        close(c);
      }).detach();
    }
  }).detach();
}

int StoreServer::open_connections() const { return state_->connections.load(); }

StoreServer::~StoreServer() {
  shutdown(fd_, SHUT_RDWR);
  close(fd_);
}

std::map<int, int> StoreServer::take_watch_lines(int world, milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  const auto all_came = [&] {
    for (int r = 1; r < world; ++r)
      if (!state_->watch_lines.count(r)) return false;
    return true;
  };
  if (!state_->cv.wait_for(lock, timeout, all_came)) {
    std::string missing;
    for (int r = 1; r < world; ++r)
      if (!state_->watch_lines.count(r)) missing += cat(missing.empty() ? "" : ", ", r);
    throw CommError(cat("gloo: rendezvous timed out after ", seconds_text(timeout),
                        ": no watch line from rank ", missing,
                        " (it died or exited right after meeting the others)"));
  }
  std::map<int, int> lines;
  for (auto it = state_->watch_lines.begin(); it != state_->watch_lines.end();) {
    if (it->first < world) {
      lines.insert(*it);
    } else {
      close(it->second);  // a stranger's claim to a rank past the world
    }
    it = state_->watch_lines.erase(it);
  }
  state_->lines_taken = true;
  return lines;
}

namespace {

bool serve_connection(int c, StoreServer::State& st, std::string& why) {
  // A rank says hello at once; a stranger that says nothing is not kept for ever.
  timeval hello_wait{10, 0};
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &hello_wait, sizeof hello_wait);
  const int hello = recv_hello(c);
  if (hello < 0) {
    why = "it sent no dsinfer-store hello within 10 s";
    return false;
  }
  if (hello == 0) {
    why = "it is not a dsinfer rank (its first bytes are not the dsinfer-store hello)";
    return false;
  }
  timeval forever{0, 0};  // a rank's requests may come far apart (it loads between them)
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
  if (!send_all(c, kStoreHello, kStoreHelloSize)) return false;
  for (;;) {
    char op = 0;
    std::string key, value;
    bool too_long = false;
    if (!recv_all(c, &op, 1)) return false;  // the rank is done
    if (op != 'S' && op != 'A' && op != 'G' && op != 'C' && op != 'W') {
      why = cat("unknown request ", static_cast<int>(static_cast<unsigned char>(op)));
      return false;
    }
    if (!recv_str(c, key, &too_long)) {
      if (too_long) why = cat("a key longer than ", kMaxStoreString, " bytes");
      return false;
    }
    if (op == 'W') {
      // the rank's liveness from here on is this connection's (comm/peer_watch.h)
      char* end = nullptr;
      const long rank = std::strtol(key.c_str(), &end, 10);
      bool kept = false;
      if (end != key.c_str() && *end == '\0' && rank >= 1 && rank <= 65535) {
        std::lock_guard<std::mutex> lock(st.mu);
        if (!st.lines_taken && st.watch_lines.size() < kMaxWatchLines)
          kept = st.watch_lines.emplace(static_cast<int>(rank), c).second;
      }
      const char ok = kept ? 1 : 0;
      if (kept) {
        st.cv.notify_all();
        send_all(c, &ok, 1);  // a failed answer shows as the line's end, on the watch
        return true;
      }
      why = cat("a watch line for rank '", key, "', which is not a rank or already has one");
      send_all(c, &ok, 1);
      return false;
    }
    if (op == 'S' || op == 'A') {
      if (!recv_str(c, value, &too_long)) {
        if (too_long) why = cat("a value longer than ", kMaxStoreString, " bytes");
        return false;
      }
      char ok = 1;
      std::string old;
      {
        std::lock_guard<std::mutex> lock(st.mu);
        auto [it, added] = st.kv.try_emplace(key, value);
        if (!added && op == 'A') ok = 0, old = it->second;
        if (!added && op == 'S') it->second = value;
      }
      st.cv.notify_all();
      if (!send_all(c, &ok, 1) || (op == 'A' && !send_str(c, old))) return false;
    } else if (op == 'G') {
      uint64_t ms = 0;
      if (!recv_all(c, &ms, 8)) return false;
      ms = std::min<uint64_t>(ms, uint64_t{1} << 40);  // (wait_for overflows past ~2^63 ns)
      // waits in slices, so that a client that leaves in the middle of a long wait (a stranger's
      // "wait 2^40 ms for a key nobody sets") frees its thread within a tenth of a second
      const auto deadline = std::chrono::steady_clock::now() + milliseconds(ms);
      std::unique_lock<std::mutex> lock(st.mu);
      bool found = false;
      for (;;) {
        const auto slice = std::min(deadline, std::chrono::steady_clock::now() + milliseconds(100));
        found = st.cv.wait_until(lock, slice, [&] { return st.kv.count(key) > 0; });
        if (found || std::chrono::steady_clock::now() >= deadline) break;
        lock.unlock();
        const bool gone = peer_gone(c);
        lock.lock();
        if (gone) return false;
      }
      if (found) value = st.kv[key];
      lock.unlock();
      const char ok = found ? 1 : 0;
      if (!send_all(c, &ok, 1) || !send_str(c, value)) return false;
    } else {
      size_t n = 0;
      {
        std::lock_guard<std::mutex> lock(st.mu);
        for (auto it = st.kv.lower_bound(key); it != st.kv.end() && it->first.rfind(key, 0) == 0;
             ++it)
          ++n;
      }
      if (!send_str(c, std::to_string(n))) return false;
    }
  }
}

}  // namespace

StoreClient::StoreClient(const std::string& host, int port, milliseconds timeout)
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
                          ": rank 0 never arrived (its store at MASTER_ADDR:MASTER_PORT = ", where_,
                          " did not answer: ", std::strerror(err),
                          "; check that rank 0 runs and that MASTER_ADDR and MASTER_PORT are the "
                          "same on every rank)"));
    std::this_thread::sleep_for(milliseconds(100));
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  limit_wait(milliseconds(0));
  if (!send_all(fd_, kStoreHello, kStoreHelloSize) || recv_hello(fd_) != 1) {
    close(fd_);
    fd_ = -1;
    throw CommError(cat("gloo: port ", port, " of ", host,
                        " (MASTER_ADDR:MASTER_PORT) answered something that is not a dsinfer "
                        "rank's store, or nothing within ",
                        seconds_text(timeout),
                        ": another program holds the port (set MASTER_PORT, or "
                        "DSINFER_STORE_PORT, to a free one) or rank 0 is another version"));
  }
}

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

StoreClient::~StoreClient() {
  if (fd_ >= 0) close(fd_);
}

void StoreClient::limit_wait(milliseconds extra) {
  const int64_t ms = (timeout_ + extra).count();
  timeval t{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

void StoreClient::lost(const std::string& doing) const {
  throw CommError(cat("gloo: lost the connection to rank 0's store at ", where_, " while ", doing,
                      " (rank 0 died or exited, or did not answer within ", seconds_text(timeout_),
                      ": DSINFER_COMM_TIMEOUT)"));
}

void StoreClient::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_wait(milliseconds(0));
  char ok = 0;
  const char op = 'S';
  if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_str(fd_, value) ||
      !recv_all(fd_, &ok, 1))
    lost("setting " + key);
}

std::optional<std::string> StoreClient::add(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_wait(milliseconds(0));
  char ok = 0;
  const char op = 'A';
  std::string old;
  if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_str(fd_, value) ||
      !recv_all(fd_, &ok, 1) || !recv_str(fd_, old))
    lost("setting " + key);
  if (ok) return std::nullopt;
  return old;
}

std::optional<std::string> StoreClient::get_within(const std::string& key, milliseconds wait) {
  std::lock_guard<std::mutex> lock(mu_);
  wait = std::max(wait, milliseconds(0));
  limit_wait(wait);  // the store answers after `wait` at the latest
  char ok = 0;
  const char op = 'G';
  const uint64_t ms = static_cast<uint64_t>(wait.count());
  std::string value;
  if (!send_all(fd_, &op, 1) || !send_str(fd_, key) || !send_all(fd_, &ms, 8) ||
      !recv_all(fd_, &ok, 1) || !recv_str(fd_, value))
    lost("waiting for " + key);
  if (!ok) return std::nullopt;
  return value;
}

int StoreClient::into_watch_line(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_wait(milliseconds(0));
  const char op = 'W';
  char ok = 0;
  if (!send_all(fd_, &op, 1) || !send_str(fd_, std::to_string(rank)) || !recv_all(fd_, &ok, 1))
    lost("opening rank " + std::to_string(rank) + "'s watch line");
  if (!ok)
    throw CommError(cat("gloo: rank 0's store at ", where_, " refused rank ", rank,
                        "'s watch line (another process claimed that rank)"));
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

size_t StoreClient::count(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_wait(milliseconds(0));
  const char op = 'C';
  std::string n;
  if (!send_all(fd_, &op, 1) || !send_str(fd_, prefix) || !recv_str(fd_, n))
    lost("counting " + prefix);
  return static_cast<size_t>(std::strtoull(n.c_str(), nullptr, 10));
}

}  // namespace dsinfer
