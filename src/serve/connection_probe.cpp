#include "serve/connection_probe.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace dsinfer {

bool client_connected(int fd) {
  if (fd < 0) return true;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return true;  // nothing to read: still waiting for our answer
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return false;
  // Readable: either the next pipelined request (connected) or end of file (gone).
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

}  // namespace dsinfer
