// ConnectionProbe finds a server-side TCP socket by its local port and peer, and sees the peer
// close it; a socket it cannot find counts as connected.
#include "serve/connection_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace dsinfer {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t n = sizeof a;
  (peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

TEST(ConnectionProbe, SeesThePeerHangUp) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  a.sin_port = htons(static_cast<uint16_t>(port_of(listener, false)));
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int served = accept(listener, nullptr, nullptr);
  ASSERT_GE(served, 0);

  const ConnectionProbe probe("127.0.0.1", port_of(served, true), port_of(served, false));
  ASSERT_TRUE(probe.found());
  EXPECT_TRUE(probe.client_connected());
  ASSERT_EQ(write(client, "GET", 3), 3);  // a pipelined next request is not a hang-up
  EXPECT_TRUE(probe.client_connected());
  close(client);
  EXPECT_FALSE(probe.client_connected());

  const ConnectionProbe nobody("127.0.0.1", 1, port_of(served, false));
  EXPECT_FALSE(nobody.found());
  EXPECT_TRUE(nobody.client_connected());
  close(served);
  close(listener);
}

}  // namespace
}  // namespace dsinfer
