// comm/peer_watch.h: a line that ends without the goodbye names its rank as dead and from then on
// the sends in flight are aborted (repeatedly, while they last); a goodbye is an orderly end; the
// destructor says goodbye except while an exception unwinds that the ranks did not agree on. The
// store hands its connections over as watch lines (comm/rendezvous_store.h 'W'). The hang it
// prevents is in tests/mp_failure_test.
#include "comm/peer_watch.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <stdexcept>
#include <thread>

#include "comm/rendezvous_store.h"
#include "parallel/comm.h"
#include "parallel/free_port.h"

namespace dsinfer::peer_watch_test {
namespace {

using std::chrono::milliseconds;

bool eventually(const std::function<bool()>& ready) {
  for (int i = 0; i < 500; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

// A connected pair of sockets: [0] for the watch, [1] the peer's end.
struct Line {
  int fds[2] = {-1, -1};
  Line() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
};

TEST(PeerWatch, ALineThatEndsWithoutGoodbyeIsADeadRankAndAbortsTheSendsInFlight) {
  Line one, two;
  PeerWatch watch({{1, one.fds[0]}, {2, two.fds[0]}});
  std::atomic<int> aborts{0};
  PeerWatch::InFlight in_flight(&watch, [&] { ++aborts; });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(watch.dead_rank(), -1);
  EXPECT_EQ(aborts.load(), 0);
  close(two.fds[1]);  // rank 2 dies
  ASSERT_TRUE(eventually([&] { return watch.dead_rank() == 2; }));
  // aborted again and again: a collective may wait on its sends more than once
  ASSERT_TRUE(eventually([&] { return aborts.load() >= 3; }));
  close(one.fds[1]);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(watch.dead_rank(), 2);  // the first death is the one named
}

TEST(PeerWatch, AGoodbyeIsAnOrderlyEnd) {
  Line one;
  PeerWatch watch(std::map<int, int>{{1, one.fds[0]}});
  std::atomic<int> aborts{0};
  PeerWatch::InFlight in_flight(&watch, [&] { ++aborts; });
  {
    PeerWatch peer(std::map<int, int>{{0, one.fds[1]}});  // says goodbye when it goes
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(watch.dead_rank(), -1);
  EXPECT_EQ(aborts.load(), 0);
}

TEST(PeerWatch, AnEndWhileAnExceptionUnwindsIsADeath) {
  Line one;
  PeerWatch watch(std::map<int, int>{{1, one.fds[0]}});
  try {
    PeerWatch peer(std::map<int, int>{{0, one.fds[1]}});
    throw std::runtime_error("this rank failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(eventually([&] { return watch.dead_rank() == 1; }));
}

// Every rank throws the same error after a completed exchange (the load check): a slower rank
// still in that exchange must finish it, so the first rank's exit is no death. Without this, a
// rank mid-send to a third, slower rank reported "lost its connection to rank 0" instead of the
// shared error (CI, 3 gloo ranks on 2 shards, 2026-12-06).
TEST(PeerWatch, AnAgreedFailureSaysGoodbyeWhileItUnwinds) {
  Line one;
  PeerWatch watch(std::map<int, int>{{1, one.fds[0]}});
  std::atomic<int> aborts{0};
  PeerWatch::InFlight in_flight(&watch, [&] { ++aborts; });
  try {
    PeerWatch peer(std::map<int, int>{{0, one.fds[1]}});
    peer.expect_agreed_failure();
    throw std::runtime_error("every rank failed the same way");
  } catch (const std::runtime_error&) {
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(watch.dead_rank(), -1);
  EXPECT_EQ(aborts.load(), 0);
}

TEST(PeerWatch, TheStoreHandsOverItsConnectionsAsWatchLines) {
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  StoreClient a("127.0.0.1", port, milliseconds(5000)), b("127.0.0.1", port, milliseconds(5000));
  StoreClient stranger("127.0.0.1", port, milliseconds(5000));
  const int line1 = a.into_watch_line(1);
  EXPECT_THROW(stranger.into_watch_line(1), CommError);  // rank 1 has its line
  const int line2 = b.into_watch_line(2);
  std::map<int, int> lines = server.take_watch_lines(3, milliseconds(5000));
  ASSERT_EQ(lines.size(), 2u);
  PeerWatch watch(lines);
  close(line2);  // rank 2 dies
  EXPECT_TRUE(eventually([&] { return watch.dead_rank() == 2; }));
  close(line1);
}

TEST(PeerWatch, AMissingWatchLineIsARendezvousErrorNamingTheRank) {
  const int port = pick_free_port();
  StoreServer server("127.0.0.1", port);
  StoreClient a("127.0.0.1", port, milliseconds(5000));
  const int line1 = a.into_watch_line(1);
  try {
    server.take_watch_lines(3, milliseconds(200));
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("no watch line from rank 2"), std::string::npos)
        << e.what();
  }
  close(line1);
}

}  // namespace
}  // namespace dsinfer::peer_watch_test
