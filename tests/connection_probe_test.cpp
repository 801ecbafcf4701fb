// client_connected sees the peer of a server-side TCP socket close it (not a pipelined request);
// no socket (-1) counts as connected.
#include "serve/connection_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace dsinfer::connection_probe_test {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t n = sizeof a;
  (peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

TEST(ClientConnected, SeesThePeerHangUp) {
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

  EXPECT_TRUE(client_connected(served));
  ASSERT_EQ(write(client, "GET", 3), 3);  // a pipelined next request is not a hang-up
  EXPECT_TRUE(client_connected(served));
  close(client);
  EXPECT_FALSE(client_connected(served));
  EXPECT_TRUE(client_connected(-1));
  close(served);
  close(listener);
}

}  // namespace
}  // namespace dsinfer::connection_probe_test
