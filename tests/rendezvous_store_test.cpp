// comm/rendezvous_store.h, the gloo rendezvous store rank 0 opens to the network: ranks set and
// wait for keys; a stranger's bytes (a 4 GiB length, an HTTP request, a wrong hello, silence)
// close that connection and never the process (5 bytes used to abort rank 0 through
// std::bad_alloc in a detached thread); a client whose port answers something else, or nothing,
// gets a CommError naming the port within its timeout.
#include "comm/rendezvous_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm.h"
#include "parallel/free_port.h"

namespace dsinfer::rendezvous_store_test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A raw connection to 127.0.0.1:port (connected, or a failed expectation).
int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// A raw connection to 127.0.0.1:port that sends `bytes`; whether the peer then closed it (reads
// EOF or a reset within 5 s).
bool closed_after_sending(int port, const std::string& bytes) {
  const int fd = connect_loopback(port);
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  timeval t{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  char buf[64];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  const bool reset = n < 0 && errno == ECONNRESET;  // closed with our bytes unread: an RST
  close(fd);
  return n == 0 || reset;
}

// `prefix` and a 4-byte length n (the wire's string header).
std::string with_length(std::string prefix, uint32_t n) {
  prefix.append(reinterpret_cast<const char*>(&n), 4);
  return prefix;
}

TEST(RendezvousStore, RanksSetAddAndWaitForKeys) {
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  StoreClient a("127.0.0.1", port, milliseconds(5000)), b("127.0.0.1", port, milliseconds(5000));
  auto later =
      std::async(std::launch::async, [&] { return b.get_within("k", milliseconds(3000)); });
  std::this_thread::sleep_for(milliseconds(100));
  a.set("k", std::string("v\0w", 3));
  EXPECT_EQ(later.get(), std::string("v\0w", 3));
  EXPECT_EQ(a.add("k", "other"), std::string("v\0w", 3));
  EXPECT_EQ(a.add("k2", "x"), std::nullopt);
  EXPECT_EQ(b.count("k"), 2u);
  EXPECT_EQ(b.get_within("absent", milliseconds(50)), std::nullopt);
}

TEST(RendezvousStore, AStrangersBytesCloseItsConnectionAndTheStoreGoesOn) {
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  const std::string hello(kStoreHello, kStoreHelloSize);
  // the probe's 5 bytes, with and without the hello, and other programs' first words
  EXPECT_TRUE(closed_after_sending(port, with_length("S", 0xFFFFFFFFu)));
  EXPECT_TRUE(closed_after_sending(port, with_length(hello + "S", 0xFFFFFFFFu)));
  EXPECT_TRUE(closed_after_sending(
      port, with_length(with_length(hello + "S", 1) + "k", kMaxStoreString + 1)));
  EXPECT_TRUE(closed_after_sending(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(closed_after_sending(port, hello + "Z"));
  StoreClient rank("127.0.0.1", port, milliseconds(5000));
  rank.set("still", "here");
  EXPECT_EQ(rank.get_within("still", milliseconds(100)), "here");
}

// A get that waits 2^40 ms for a key nobody sets ties up a thread of the store for as long as its
// client stays; when the client leaves, the thread ends within a fraction of a second (it used to
// wait the whole time: a stranger's connections could pile up threads).
TEST(RendezvousStore, AGetWhoseClientLeftEndsItsWait) {
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  const int fd = connect_loopback(port);
  const uint64_t forever = uint64_t{1} << 40;
  std::string get = with_length(std::string(kStoreHello, kStoreHelloSize) + "G", 6) + "absent";
  get.append(reinterpret_cast<const char*>(&forever), 8);
  ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  auto connections_become = [&](int n) {
    for (const auto until = Clock::now() + milliseconds(2000); Clock::now() < until;) {
      if (server.open_connections() == n) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return server.open_connections() == n;
  };
  EXPECT_TRUE(connections_become(1));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(server.open_connections(), 1) << "the get is still waiting while its client is there";
  close(fd);
  const auto left = Clock::now();
  EXPECT_TRUE(connections_become(0)) << "the get outlived its client";
  EXPECT_LT(Clock::now() - left, milliseconds(1000));
  // and the store goes on
  StoreClient rank("127.0.0.1", port, milliseconds(5000));
  rank.set("k", "v");
  EXPECT_EQ(rank.get_within("k", milliseconds(100)), "v");
}

// A handled signal interrupts a blocked recv with EINTR (libFuzzer's timer did, in CI): a rank
// waiting for a key retries instead of taking it for rank 0's death.
TEST(RendezvousStore, ASignalDuringAWaitIsNotALostConnection) {
  struct sigaction handled {
  }, before{};
  handled.sa_handler = [](int) {};
  sigemptyset(&handled.sa_mask);
  handled.sa_flags = 0;  // no SA_RESTART: the interrupted recv returns EINTR
  ASSERT_EQ(sigaction(SIGUSR1, &handled, &before), 0);
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  StoreClient waiter("127.0.0.1", port, milliseconds(5000));
  StoreClient setter("127.0.0.1", port, milliseconds(5000));
  std::promise<std::string> got;
  std::promise<void> may_end;  // the waiting thread outlives every signal sent to it
  std::thread waiting([&] {
    try {
      got.set_value(waiter.get_within("k", milliseconds(3000)).value_or("(none)"));
    } catch (const std::exception& e) {
      got.set_value(std::string("error: ") + e.what());
    }
    may_end.get_future().wait();
  });
  for (int i = 0; i < 30; ++i) {  // 300 ms of signals, mostly landing in the blocked recv
    pthread_kill(waiting.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(milliseconds(10));
  }
  setter.set("k", "v");
  auto answer = got.get_future();
  EXPECT_EQ(answer.get(), "v");
  may_end.set_value();
  waiting.join();
  sigaction(SIGUSR1, &before, nullptr);
}

// A listening socket on a free port whose connections get `answer` (or nothing) and stay open.
class FakePeer {
 public:
  explicit FakePeer(std::string answer) : port_(pick_free_port()) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    listen(fd_, 8);
    thread_ = std::thread([this, answer] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      if (!answer.empty()) send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      char buf[256];
      while (recv(c, buf, sizeof buf, 0) > 0) {  // until the client goes
      }
      close(c);
    });
  }
  ~FakePeer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int port_, fd_;
  std::thread thread_;
};

TEST(RendezvousStore, APortThatAnswersSomethingElseOrNothingIsNamedWithinTheTimeout) {
  const std::vector<std::string> answers = {"HTTP/1.1 400 Bad Request\r\n\r\n", ""};
  for (const std::string& answer : answers) {
    FakePeer peer(answer);
    const auto start = Clock::now();
    try {
      StoreClient client("127.0.0.1", peer.port(), milliseconds(1000));
      ADD_FAILURE() << "connected to a port that is not a store";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("not a dsinfer rank's store"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(peer.port())), std::string::npos);
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0)
        << (answer.empty() ? "silent peer" : "HTTP peer");
  }
}

}  // namespace
}  // namespace dsinfer::rendezvous_store_test
