#include "serve/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dsinfer {
namespace {

// Address and port of a sockaddr as text and number; false for families other than IPv4/IPv6.
bool describe(const sockaddr_storage& a, std::string& addr, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    if (!inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text)) return false;
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (!inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text)) return false;
    port = ntohs(v6.sin6_port);
  } else {
    return false;
  }
  addr = text;
  return true;
}

// Calls visit(fd) for each open fd of this process until it returns true; false if none did.
template <class Visit>
bool find_fd(const Visit& visit) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return false;
  bool found = false;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if ((found = visit(static_cast<int>(fd)))) break;
  }
  closedir(dir);
  return found;
}

// The address and port a socket is bound to (peer: connected to); false for other fds.
bool socket_end(int fd, bool peer, std::string& addr, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return r == 0 && describe(a, addr, port);
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port) {
  find_fd([&](int fd) {
    std::string laddr, paddr;
    int lport = -1, pport = -1;
    if (!socket_end(fd, false, laddr, lport) || !socket_end(fd, true, paddr, pport)) return false;
    if (lport != local_port || pport != remote_port || paddr != remote_addr) return false;
    fd_ = fd;
    return true;
  });
}

bool ConnectionProbe::client_connected() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return true;  // nothing to read: still waiting for our answer
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return false;
  // Readable: either the next pipelined request (connected) or end of file (gone).
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

}  // namespace dsinfer
