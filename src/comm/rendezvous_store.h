// The gloo backend's rendezvous: rank 0 serves a small key-value store (Debian's gloo has no TCP
// store) and every rank, rank 0 included, connects to it until the ranks have met. Its port is
// open to the network, so the wire is defended: a connection opens with kStoreHello both ways (a
// stranger, or another program answering at the port, is named as such), every length read is
// bounded by kMaxStoreString, and a bad connection is closed with a line on stderr, never the
// process. Requests: 'S' key value sets (answered by one byte); 'A' key value sets only an absent
// key (answers 1, or 0 and the value already there); 'G' key timeout_ms waits for the key
// (answers 1 and its value, or 0 and nothing on timeout); 'C' prefix answers how many keys start
// with prefix, as text; 'W' rank turns the connection into that rank's watch line (answers 1, or 0
// for a rank that is not a number in [1, 65535] or already has one) and ends the requests on it:
// rank 0 takes it over (comm/peer_watch.h). Strings go as a 4-byte length and the bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace dsinfer {

// The first bytes each side sends: protocol and version.
inline constexpr char kStoreHello[] = "dsinfer-store/1\n";
inline constexpr size_t kStoreHelloSize = sizeof kStoreHello - 1;
// The longest key or value (the rendezvous stores each rank's few addresses).
inline constexpr uint32_t kMaxStoreString = 1u << 20;
// Watch lines the store keeps at most (one per rank but rank 0): a stranger's 'W' requests for
// made-up ranks cannot take every file descriptor.
inline constexpr size_t kMaxWatchLines = 4096;

// Rank 0's store: listens on `host`'s address when it is a literal IPv4 address of this machine
// (MASTER_ADDR=127.0.0.1 keeps it off the network), else on every interface (said on stderr);
// serves each connection on its own thread until the store is destroyed.
class StoreServer {
 public:
  StoreServer(const std::string& host, int port);
  ~StoreServer();  // stops listening (connections already open end with their clients)
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The watch lines of ranks 1 .. world - 1 (rank -> socket, now the caller's to close), waiting
  // up to `timeout` for them; a CommError names the ranks whose line never came.
  std::map<int, int> take_watch_lines(int world, std::chrono::milliseconds timeout);
  // Connections whose requests are being served now (a thread each; a watch line no longer
  // counts): a client that goes away ends its own, even in the middle of a long get.
  int open_connections() const;

  struct State;  // the keys and values, shared with the connections' threads (in the .cpp)

 private:
  int fd_ = -1;
  std::shared_ptr<State> state_;
};

// A rank's connection to rank 0's store at host:port (MASTER_ADDR, MASTER_PORT): connects within
// `timeout`, retrying while rank 0 is not up yet; every later request is bounded by `timeout` too
// (DSINFER_COMM_TIMEOUT), a get by its wait plus `timeout`. Failures are CommErrors naming
// host:port.
class StoreClient {
 public:
  StoreClient(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  const std::string& where() const { return where_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set(const std::string& key, const std::string& value);
  // Sets an absent key: nullopt, or the value another process set first.
  std::optional<std::string> add(const std::string& key, const std::string& value);
  // The value of key, waiting up to `wait` for it; nullopt when it did not come.
  std::optional<std::string> get_within(const std::string& key, std::chrono::milliseconds wait);
  // How many keys start with prefix.
  size_t count(const std::string& prefix);
  // Ends this client's requests and turns its connection into rank `rank`'s watch line to rank 0
  // (comm/peer_watch.h): returns the socket, now the caller's to close.
  int into_watch_line(int rank);

 private:
  [[noreturn]] void lost(const std::string& doing) const;
  void limit_wait(std::chrono::milliseconds extra);  // the socket's send / receive timeouts
  std::string where_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::mutex mu_;
};

// The local address this host uses to reach `master` (no packet is sent): where gloo's transport
// listens. `master` itself when there is no route.
std::string local_address_towards(const std::string& master);

}  // namespace dsinfer
