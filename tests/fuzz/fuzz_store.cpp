// The gloo rendezvous store's wire (comm/rendezvous_store.h), which rank 0 opens to the network
// during the rendezvous: a connection that sends any bytes (with the hello first when the input's
// first byte is odd, as a rank would, else a stranger's bytes as they come) and then half-closes
// must be answered or closed without crashing, hanging or keeping its thread (a get whose client
// left ends its wait); every 64 inputs a rank is still served, and the store's threads stay few.
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "comm/rendezvous_store.h"
#include "core/error.h"
#include "fuzz_support.h"
#include "parallel/free_port.h"

using namespace dsinfer;
using std::chrono::milliseconds;

namespace {

struct Store {
  int port;
  StoreServer server;
  Store() : port(pick_free_port()), server("127.0.0.1", port) {
    // (kept watch lines hold descriptors: the store caps them at kMaxWatchLines)
    rlimit r{};
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
};

Store& store() {
  static Store s;
  return s;
}

// A connected socket to the store. A connect interrupted by libFuzzer's timer signal (EINTR, no
// SA_RESTART) goes on in the background, so it is finished by polling, as a rank's client would
// retry; only a store that refuses or never answers for 2 s is a finding.
int connect_to_store(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fuzz::finding(std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  int err = errno;
  if (err == EINTR) {
    pollfd p{fd, POLLOUT, 0};
    int ready = 0;
    for (int waited = 0; waited < 2000 && ready <= 0; waited += 100) ready = poll(&p, 1, 100);
    socklen_t len = sizeof err;
    if (ready <= 0)
      err = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
      err = errno;
    if (err == 0) return fd;
  }
  fuzz::finding(std::string("the store stopped accepting connections: ") + std::strerror(err));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Store& s = store();
  std::string bytes;
  if (size > 0 && (data[0] & 1)) bytes.assign(kStoreHello, kStoreHelloSize);
  if (size > 0) bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  const int fd = connect_to_store(s.port);
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  timeval wait{0, 200000};  // (a kept watch line never closes: its client gives up)
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char buf[4096];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0 || (n < 0 && errno == EINTR)) {
  }
  close(fd);
  static int inputs = 0;
  if (++inputs % 64 == 0) {
    try {
      StoreClient rank("127.0.0.1", s.port, milliseconds(2000));
      rank.set("fuzz/alive", "yes");
      if (rank.get_within("fuzz/alive", milliseconds(100)) != "yes")
        fuzz::finding("the store lost a rank's key");
    } catch (const Error& e) {
      fuzz::finding(std::string("a rank is no longer served: ") + e.what());
    }
    // connections end with their clients (a long get included): threads do not pile up
    for (int i = 0; i < 100 && s.server.open_connections() > 16; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    if (s.server.open_connections() > 16)
      fuzz::finding("store connections outlive their clients: " +
                    std::to_string(s.server.open_connections()) + " open");
  }
  return 0;
}
