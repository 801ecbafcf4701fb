#include "parallel/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "core/error.h"

namespace dsinfer {

bool can_bind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  check(fd >= 0, "cannot open a socket: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

int pick_free_port(int count) {
  int ephemeral_low = 32768;  // Linux's default
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> ephemeral_low;
  const int high = std::max(2048, ephemeral_low) - count, low = std::max(1024, high - 10000);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = pick(rng);
    bool all = true;
    for (int i = 0; i < count && all; ++i) all = can_bind(port + i);
    if (all) return port;
  }
  fail("no free TCP port in [", low, ", ", high, "] (below the ephemeral range) after 200 tries");
}

}  // namespace dsinfer
