// serve/guarded_http_server.h with a toy handler, spoken to over raw sockets: slow clients
// (slowloris: a header or a body trickled a byte at a time) get 408 by their deadline and never
// starve others; past max_connections idle connections make room and busy ones mean 503;
// close_connections() ends clients that neither send nor read, so stop() returns at once.
#include "serve/guarded_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "raw_client.h"

namespace dsinfer::guarded_http_server_test {
namespace {

using test::RawClient;

// A server on a free port of 127.0.0.1 with GET /ping, POST /echo (the body back) and GET /big
// (8 MiB, more than the socket buffers hold).
class Toy {
 public:
  explicit Toy(const ConnectionLimits& limits) : http_(limits) {
    http_.Get("/ping", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("pong", "text/plain");
    });
    http_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    // the port of the peer of request_socket(): the request's own remote_port
    http_.Get("/socket", [](const httplib::Request& req, httplib::Response& res) {
      sockaddr_in peer{};
      socklen_t len = sizeof peer;
      const int fd = GuardedHttpServer::request_socket();
      const bool same = fd >= 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
                        ntohs(peer.sin_port) == req.remote_port;
      res.set_content(same ? "same" : "other", "text/plain");
    });
    http_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(8 << 20, 'x'), "text/plain");
    });
    port_ = http_.bind_port("127.0.0.1", 0);
    listener_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Toy() { stop(); }
  void stop() {
    if (!listener_.joinable()) return;
    http_.stop();
    listener_.join();
  }
  GuardedHttpServer& http() { return http_; }
  int port() const { return port_; }
  // GET path with a fresh client; the status, or -1 when no answer came within `seconds`.
  int get(const std::string& path, int seconds = 5) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(seconds, 0);
    c.set_read_timeout(seconds, 0);
    auto r = c.Get(path.c_str());
    return r ? r->status : -1;
  }

 private:
  GuardedHttpServer http_;
  int port_ = -1;
  std::thread listener_;
};

// How many of `n` clients connecting at once to a listener nobody accepts on get through the
// handshake within half a second (each beyond the accept queue has its handshake dropped).
int connected_at_once(int listener_port, int n) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(listener_port));
  std::vector<int> clients;
  for (int i = 0; i < n; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS
    clients.push_back(c);
  }
  usleep(500'000);
  int connected = 0;
  for (int c : clients) {
    // established from the client's side and acknowledged by the server: a 1-byte send that the
    // server's queue would hold; SYN-dropped ones are still connecting (EAGAIN / ENOTCONN)
    pollfd p{c, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 0) == 1 && getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      ++connected;
    close(c);
  }
  return connected;
}

ConnectionLimits quick_limits() {
  ConnectionLimits limits;
  limits.request_seconds = 1;
  limits.idle_seconds = 30;
  return limits;
}

// httplib listens with a backlog of 5, which dropped the handshakes of a burst of 16 clients (the
// flaky Serve.ConcurrentClientsGetTheirSoloAnswers): bind_port widens it.
TEST(GuardedHttpServer, ABurstOfClientsGetsThroughTheHandshake) {
  GuardedHttpServer http(quick_limits());
  const int port = http.bind_port("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  EXPECT_EQ(connected_at_once(port, 24), 24);  // (nobody accepts yet: the backlog holds them all)
  std::thread listener([&] { http.listen_after_bind(); });
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http.stop();
  listener.join();
}

TEST(GuardedHttpServer, AHandlerKnowsItsRequestsSocket) {
  Toy toy(quick_limits());
  httplib::Client c("127.0.0.1", toy.port());
  for (int i = 0; i < 3; ++i) {  // (keep-alive: the same connection's next requests too)
    auto r = c.Get("/socket");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "same");
  }
  EXPECT_EQ(GuardedHttpServer::request_socket(), -1);  // (outside a request)
}

TEST(GuardedHttpServer, AHeaderTrickledAByteAtATimeGets408ByItsDeadline) {
  Toy toy(quick_limits());
  RawClient slow(toy.port());
  ASSERT_TRUE(slow.connected());
  const std::string request = "GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaa\r\n\r\n";
  const double start = now_seconds();
  std::string answer;
  for (char c : request) {  // a byte every 100 ms: each recv is quick, the request never is
    if (!slow.send_text(std::string(1, c))) break;
    answer += slow.read_all(0.1);
    if (!answer.empty()) break;
  }
  answer += slow.read_all(1);
  const double took = now_seconds() - start;
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("request_timeout"), std::string::npos) << answer;
  EXPECT_NE(answer.find("--request-timeout"), std::string::npos) << answer;
  EXPECT_LT(took, 3.0);
  EXPECT_TRUE(slow.closed_within(1));
}

TEST(GuardedHttpServer, ABodyBelowTheMinimumRateGets408AndAQuickOneIsAnswered) {
  Toy toy(quick_limits());
  {
    RawClient slow(toy.port());
    ASSERT_TRUE(slow.send_text("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"));
    std::string answer;
    for (int i = 0; i < 40 && answer.empty(); ++i) {  // 10 bytes every 100 ms: 100 bytes/s
      if (!slow.send_text(std::string(10, 'b'))) break;
      answer += slow.read_all(0.1);
    }
    answer += slow.read_all(1);
    EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  }
  // 1 MB at once: its bytes extend its deadline (1 s + 2000 s), and it is answered
  httplib::Client c("127.0.0.1", toy.port());
  const std::string body(1 << 20, 'q');
  auto r = c.Post("/echo", body, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
}

TEST(GuardedHttpServer, AHundredSlowClientsStarveNoOne) {
  Toy toy(quick_limits());
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<RawClient>(toy.port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->send_text("GET /ping HTTP/1.1\r\n"));
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {  // each sends a header byte every 200 ms until it is cut off
    while (!done) {
      for (auto& s : slow) s->send_text("X");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  for (int i = 0; i < 10; ++i) {
    const double start = now_seconds();
    EXPECT_EQ(toy.get("/ping", 5), 200) << "request " << i << " beside 100 slow clients";
    EXPECT_LT(now_seconds() - start, 1.0) << "request " << i;
  }
  // and every slow one is cut off by its deadline (1 s) with a 408
  int timed_out = 0;
  for (auto& s : slow) timed_out += s->read_all(3).rfind("HTTP/1.1 408", 0) == 0;
  done = true;
  trickle.join();
  EXPECT_EQ(timed_out, 100);
}

TEST(GuardedHttpServer, PastTheLimitIdleConnectionsMakeRoomAndBusyOnesMean503) {
  ConnectionLimits limits = quick_limits();
  limits.max_connections = 4;
  limits.request_seconds = 30;
  Toy toy(limits);
  {
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<RawClient>(toy.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(toy.http().open_connections(), 4);
    EXPECT_EQ(toy.get("/ping"), 200);  // an idle one was closed for it
    int closed = 0;
    for (auto& s : idle) closed += s->closed_within(0.2);
    EXPECT_GE(closed, 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<std::unique_ptr<RawClient>> busy;  // four requests half sent
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<RawClient>(toy.port()));
    busy.back()->send_text("GET /ping HTTP/1.1\r\n");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient refused(toy.port());
  refused.send_text("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = refused.read_all(2);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("--max-connections"), std::string::npos) << answer;
  busy.clear();  // their slots free up: requests are served again
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(toy.get("/ping"), 200);
}

TEST(GuardedHttpServer, ClosingEndsClientsThatNeitherSendNorReadAndStopReturns) {
  ConnectionLimits limits = quick_limits();
  limits.request_seconds = 60;
  Toy toy(limits);
  RawClient half_sent(toy.port()), not_reading(toy.port()), idle(toy.port());
  half_sent.send_text("GET /ping HTTP/1.1\r\n");
  not_reading.send_text("GET /big HTTP/1.1\r\nHost: x\r\n\r\n");  // 8 MiB nobody reads
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(toy.http().open_connections(), 3);
  const double start = now_seconds();
  toy.http().close_connections(0.5);
  toy.stop();
  const double took = now_seconds() - start;
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(toy.http().open_connections(), 0);
  EXPECT_TRUE(idle.closed_within(1));
  EXPECT_TRUE(half_sent.closed_within(1));
}

}  // namespace
}  // namespace dsinfer::guarded_http_server_test
