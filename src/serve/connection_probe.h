// Whether the client of a request is still connected, for handlers that do not write until the
// end (a non-streamed completion): the peer has not closed or reset the request's socket
// (GuardedHttpServer::request_socket()).
#pragma once

namespace dsinfer {

// False once the peer of socket `fd` closed or reset its end (read side at end of file or in
// error); a pipelined next request is not a hang-up. fd < 0 (no socket known): true, so that a
// request nobody can observe is never cancelled.
bool client_connected(int fd);

}  // namespace dsinfer
