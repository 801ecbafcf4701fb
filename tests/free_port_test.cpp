// pick_free_port: below the kernel's ephemeral range, bindable, and for count > 1 a run of
// bindable ports.
#include "parallel/free_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

namespace dsinfer {
namespace {

bool bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

TEST(FreePort, BelowTheEphemeralRangeAndBindable) {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  for (int count : {1, 2, 3}) {
    const int port = pick_free_port(count);
    EXPECT_GE(port, 1024);
    EXPECT_LT(port + count - 1, ephemeral_low) << "count " << count;
    for (int i = 0; i < count; ++i) EXPECT_TRUE(bindable(port + i)) << port + i;
  }
}

}  // namespace
}  // namespace dsinfer
