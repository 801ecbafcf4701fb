// cpp-httplib's server with connections no client can hold for ever. Debian's cpp-httplib 0.11.4
// bounds each recv, not a request (a client sending a byte every few seconds keeps its connection
// and its worker for ever), and serves from a fixed pool of workers: a few dozen such clients
// (slowloris) starved every request, /health included, and kept SIGTERM's drain from ending.
// Here each connection has its own thread, up to max_connections open at once; a request's
// header and body must arrive by a deadline; idle keep-alive connections are the first to go when
// the slots run out; and close_connections() ends every connection, so stop() never waits on a
// client. Requests themselves are still httplib's (routing, parsing, handlers, responses).
#pragma once

#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

namespace dsinfer {

struct ConnectionLimits {
  int max_connections = 512;  // open at once; past it idle ones are closed, else new ones get 503
  // a request (header and body) must arrive within request_seconds of its first byte, plus one
  // second for each min_bytes_per_second bytes received (mod_reqtimeout's rule): a slow
  // connection is cut with 408 by then, however steadily it trickles
  double request_seconds = 10;
  double min_bytes_per_second = 500;
  double idle_seconds = 5;    // wait for a connection's first or next request
  double write_seconds = 30;  // one write's wait for a client that does not read
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(const ConnectionLimits& limits);
  // Binds host:port (0: any free port) and returns the port, or -1 when it cannot. The listen
  // backlog becomes `backlog`: httplib's is 5, which a burst of clients overflows (a dropped
  // handshake costs its client a second or its request).
  int bind_port(const std::string& host, int port, int backlog = 1024);
  // The last step of a drain, so that stop() waits on no client: refuses new connections, ends
  // idle ones now, lets the others finish the request they are in (a response being written) for
  // up to grace_seconds, then ends them too (shuts their sockets down; their threads end).
  void close_connections(double grace_seconds);
  int open_connections() const;
  // The socket of the request the calling thread is serving (handlers and content providers run
  // on their connection's thread), or -1 outside one.
  static int request_socket();

 private:
  bool process_and_close_socket(socket_t sock) override;  // (httplib's per-connection entry)
  bool admit(socket_t sock);
  bool set_idle(socket_t sock, bool idle);  // false once closing
  void forget(socket_t sock);
  bool wait_for_request(socket_t sock) const;
  void serve_connection(socket_t sock);

  const ConnectionLimits limits_;
  mutable std::mutex mutex_;
  std::map<socket_t, bool> open_;  // socket -> idle (waiting for a request); under mutex_
  bool closing_ = false;           // under mutex_
};

// httplib's task queue for GuardedHttpServer: a thread per connection (the server bounds how many
// run); shutdown() waits until every one has ended.
class ThreadPerConnection : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  std::mutex mutex_;
  std::condition_variable ended_;
  int running_ = 0;
};

}  // namespace dsinfer
