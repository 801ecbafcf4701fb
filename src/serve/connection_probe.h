// Whether the client of a request is still connected, for handlers that do not write until the
// end (a non-streamed completion). cpp-httplib 0.11 gives a handler no socket, so the probe finds
// it: the one open TCP socket of this process whose local port and peer address match the
// request's. The fd stays open (httplib holds it) while the handler runs, so it cannot be reused
// under the probe.
#pragma once

#include <string>

namespace dsinfer {

class ConnectionProbe {
 public:
  // Finds the socket; a probe that found none reports the client as connected (never cancels
  // a request it cannot observe).
  ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port);
  bool found() const { return fd_ >= 0; }
  // False once the peer closed or reset its end (read side at end of file or in error).
  bool client_connected() const;

 private:
  int fd_ = -1;
};

// cpp-httplib (Debian's libcpp-httplib.so, whose macros a client cannot change) listens with a
// backlog of 5: a burst of clients overflows it (TcpExtListenOverflows) and a dropped handshake
// costs a client a second or its request. listen() again on the listening socket of `local_port`
// (found as the probe finds a connection) raises it; false when no such socket was found.
bool raise_listen_backlog(int local_port, int backlog);

}  // namespace dsinfer
