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

}  // namespace dsinfer
