// Notices a rank that died, for the gloo backend, where gloo alone can miss it: Debian's gloo
// (0.0~git20220518, and upstream as of 2026) never wakes a send that sits in a pair's transmit
// queue when the pair closes (Pair::signalException signals the queue's bound buffers, not its
// unbound ones), so a rank broadcasting to a peer that had just died waited for ever (rank 0 of a
// generate job, once in ~10 runs of tests/mp_failure_test under load). Receives are not affected:
// gloo wakes them, after the bytes that came before the close.
//
// The watch keeps one TCP line per pair of rank 0 and another rank (the rendezvous store's own
// connections, turned over when the ranks have met: comm/rendezvous_store.h), and a thread that
// polls them. A line that ends without the goodbye byte is a dead rank: from then on the thread
// aborts the send waits of every collective in flight (those registered through InFlight), which
// then reports the lost rank instead of waiting (a send that had completed is told apart:
// comm/gloo_watched_buffer.h). With more than two ranks, rank 0 notices any
// death and the others notice rank 0's exit that follows.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace dsinfer {

class PeerWatch {
 public:
  // lines: peer rank -> connected socket (owned from here on).
  explicit PeerWatch(std::map<int, int> lines);
  // Says goodbye on every line (unless an exception is unwinding that the ranks did not agree on:
  // then this rank's end is a failure its peers must notice), then closes them.
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // The first rank whose line ended without a goodbye, or -1.
  int dead_rank() const { return dead_rank_.load(); }
  // The error that will unwind this rank is every rank's (Comm::expect_agreed_failure): goodbye.
  void expect_agreed_failure() { agreed_failure_ = true; }

  // For the life of one buffer of a collective: `abort_sends` (its abortWaitSend) is called every
  // few milliseconds once a peer has died (comm/gloo_watched_buffer.h).
  class InFlight {
   public:
    InFlight(PeerWatch* watch, std::function<void()> abort_sends);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    friend class PeerWatch;
    PeerWatch* watch_;
    std::function<void()> abort_sends_;
    std::list<InFlight*>::iterator at_;
  };

 private:
  void run();
  std::map<int, int> lines_;
  int wake_[2] = {-1, -1};  // a pipe: the destructor's word to the thread
  std::atomic<int> dead_rank_{-1};
  bool agreed_failure_ = false;
  std::mutex mu_;  // in_flight_
  std::list<InFlight*> in_flight_;
  std::thread thread_;
};

}  // namespace dsinfer
