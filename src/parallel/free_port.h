// A TCP port for a rendezvous that a launcher chooses before its ranks start (dsinfer run, the
// tests' hand-started ranks).
#pragma once

namespace dsinfer {

// A port on 127.0.0.1 that nothing is bound to right now, chosen at random below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a port the kernel hands out itself could be
// taken meanwhile by any socket of any process (gloo's own pair sockets, a client) before
// rank 0 binds it; one below the range is taken only by someone who names it. With count > 1,
// ports p .. p + count - 1 are all free (torchrun's agent store and ours). Throws Error when
// none is found.
int pick_free_port(int count = 1);

// Whether a TCP socket can bind `port` on all addresses right now.
bool can_bind(int port);

}  // namespace dsinfer
