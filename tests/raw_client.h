// A raw TCP client of a server on 127.0.0.1, for tests of what slow or broken HTTP clients do.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "core/log.h"

namespace dsinfer::test {

// A TCP client that sends and reads raw bytes: what a slow or broken HTTP client does.
class RawClient {
 public:
  // receive_buffer > 0: the socket's receive buffer in bytes (small: a client that reads
  // nothing soon blocks the server's writes)
  explicit RawClient(int port, int receive_buffer = 0) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer > 0)
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(fd_); }
  bool connected() const { return connected_; }
  // Closes the sending side only (the answer can still be read).
  void shut_write() const { shutdown(fd_, SHUT_WR); }
  bool send_text(const std::string& s) const {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // What arrives until the server closes the connection or `seconds` pass.
  std::string read_all(double seconds) const {
    std::string got;
    const double until = now_seconds() + seconds;
    char buf[4096];
    while (now_seconds() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // Whether the server has closed the connection (end of file, after any data) within `seconds`.
  bool closed_within(double seconds) const {
    const double until = now_seconds() + seconds;
    char buf[4096];
    while (now_seconds() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      if (recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace dsinfer::test
