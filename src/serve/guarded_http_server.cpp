#include "serve/guarded_http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "core/log.h"
#include "serve/connection_probe.h"
#include "serve/responses.h"

namespace dsinfer {

namespace {

// poll() for `events` up to `seconds` (EINTR retried with what is left): whether they came.
bool wait_for(socket_t sock, short events, double seconds) {
  const double until = now_seconds() + seconds;
  for (;;) {
    const double left = until - now_seconds();
    pollfd p{sock, events, 0};
    const int ms = left <= 0 ? 0 : static_cast<int>(std::min(left * 1000.0 + 1.0, 2.0e9));
    const int r = poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

// A whole response written without waiting (a refusal: the client's request is never read).
void send_now(socket_t sock, int status, const char* reason, const std::string& message,
              const char* code) {
  const std::string body = error_body({status, "server_error", message, "", code});
  const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                           "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                           "Content-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  const std::string all = head + body;
  (void)!send(sock, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void close_connection(socket_t sock) {
  shutdown(sock, SHUT_RDWR);
  close(sock);
}

void ip_and_port(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                     : getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (r != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv,
                            sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

// One request's view of its connection for httplib: reads buffered (httplib reads the header a
// byte at a time) and bounded by the request's deadline, writes bounded by write_seconds. At the
// deadline it answers 408 itself and fails every later read and write, so httplib gives up.
class RequestStream : public httplib::Stream {
 public:
  RequestStream(socket_t sock, const ConnectionLimits& limits)
      : sock_(sock), limits_(limits), start_(now_seconds()) {}

  bool expired() const { return expired_; }

  bool is_readable() const override {
    return next_ < end_ || (!expired_ && wait_for(sock_, POLLIN, seconds_left()));
  }
  bool is_writable() const override {
    // (and the peer has not closed its end, as httplib's own stream checks)
    return !expired_ && wait_for(sock_, POLLOUT, limits_.write_seconds) && client_connected(sock_);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (next_ == end_) {
      if (expired_) return -1;
      if (!wait_for(sock_, POLLIN, seconds_left())) {
        if (seconds_left() <= 0) expire();
        return -1;
      }
      ssize_t n;
      do n = recv(sock_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      received_ += n;
      next_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - next_);
    std::memcpy(ptr, buffer_ + next_, n);
    next_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (expired_ || !wait_for(sock_, POLLOUT, limits_.write_seconds)) return -1;
    ssize_t n;
    do n = send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  double seconds_left() const {
    const double deadline = start_ + limits_.request_seconds +
                            static_cast<double>(received_) / limits_.min_bytes_per_second;
    return deadline - now_seconds();
  }
  void expire() {
    expired_ = true;
    log_debug("serve: a request did not arrive within its deadline; closing its connection");
    send_now(sock_, 408, "Request Timeout",
             "the request did not arrive in time: its header and body must come within " +
                 std::to_string(static_cast<int>(limits_.request_seconds)) +
                 " s (--request-timeout) plus 1 s per " +
                 std::to_string(static_cast<int>(limits_.min_bytes_per_second)) + " bytes",
             "request_timeout");
  }

  socket_t sock_;
  const ConnectionLimits& limits_;
  double start_;
  int64_t received_ = 0;
  bool expired_ = false;
  char buffer_[4096];
  size_t next_ = 0, end_ = 0;
};

// Set on the listener's thread when no thread could be started for a connection: it is then
// refused there, without reading it.
thread_local bool refuse_here = false;
// The socket whose request this thread is serving (request_socket()).
thread_local int this_request_socket = -1;

}  // namespace

GuardedHttpServer::GuardedHttpServer(const ConnectionLimits& limits) : limits_(limits) {
  new_task_queue = [] { return new ThreadPerConnection(); };
}

int GuardedHttpServer::bind_port(const std::string& host, int port, int backlog) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound >= 0 && ::listen(svr_sock_, backlog) != 0)
    log_debug("serve: the listen backlog stays cpp-httplib's 5 (", std::strerror(errno), ")");
  return bound;
}

int GuardedHttpServer::request_socket() { return this_request_socket; }

int GuardedHttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(open_.size());
}

void GuardedHttpServer::close_connections(double grace_seconds) {
  // (a socket stays open while it is listed: its thread unlists it before closing it)
  auto shut = [this](bool idle_only) {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    for (const auto& [sock, idle] : open_)
      if (idle || !idle_only) shutdown(sock, SHUT_RDWR);
  };
  shut(/*idle_only=*/true);
  const double until = now_seconds() + grace_seconds;
  while (open_connections() > 0 && now_seconds() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  shut(/*idle_only=*/false);
}

bool GuardedHttpServer::admit(socket_t sock) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return false;
  if (static_cast<int>(open_.size()) >= limits_.max_connections) {
    // the slots are full: an idle connection makes room (its thread ends when its poll wakes)
    auto idle = std::find_if(open_.begin(), open_.end(), [](const auto& e) { return e.second; });
    if (idle == open_.end()) return false;
    shutdown(idle->first, SHUT_RDWR);
    idle->second = false;
  }
  open_[sock] = true;
  return true;
}

bool GuardedHttpServer::set_idle(socket_t sock, bool idle) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_[sock] = idle;
  return !closing_;
}

void GuardedHttpServer::forget(socket_t sock) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_.erase(sock);
}

bool GuardedHttpServer::wait_for_request(socket_t sock) const {
  // in slices, so that a stopped server's connections end within one
  const double until = now_seconds() + limits_.idle_seconds;
  while (svr_sock_ != INVALID_SOCKET) {
    const double left = until - now_seconds();
    if (left <= 0) return false;
    if (wait_for(sock, POLLIN, std::min(left, 0.1))) return true;
  }
  return false;
}

void GuardedHttpServer::serve_connection(socket_t sock) {
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!set_idle(sock, true) || !wait_for_request(sock)) return;
    set_idle(sock, false);
    RequestStream stream(sock, limits_);
    bool closed = false;
    const bool last = left == 1 || svr_sock_ == INVALID_SOCKET;
    this_request_socket = sock;
    const bool ok = process_request(stream, last, closed, nullptr);
    this_request_socket = -1;
    if (!ok || closed || stream.expired()) return;
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  if (refuse_here || !admit(sock)) {
    const bool closing = [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      return closing_;
    }();
    if (closing)
      send_now(sock, 503, "Service Unavailable", "the server is shutting down", "shutting_down");
    else
      send_now(sock, 503, "Service Unavailable",
               "the server has " + std::to_string(limits_.max_connections) +
                   " connections open, its --max-connections; retry shortly",
               "too_many_connections");
    // (what the client sent is read and dropped first: closing a socket with unread data resets
    // the connection, and the client might not see the answer)
    char sink[4096];
    for (int i = 0; i < 16 && recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    close_connection(sock);
    return false;
  }
  serve_connection(sock);
  forget(sock);
  close_connection(sock);
  return true;
}

void ThreadPerConnection::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++running_;
  }
  auto run = [this, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    ended_.notify_all();  // (under the lock: shutdown() may destroy this queue once it is free)
  };
  try {
    std::thread(run).detach();
  } catch (const std::system_error& e) {
    log_info("warning: serve: no thread for a new connection (", e.what(), "): refused");
    refuse_here = true;
    run();
    refuse_here = false;
  }
}

void ThreadPerConnection::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  ended_.wait(lock, [this] { return running_ == 0; });
}

}  // namespace dsinfer
