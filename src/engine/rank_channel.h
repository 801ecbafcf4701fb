// The engine's side of the ranks' protocol (engine/step_orders.h): before each step rank 0 sends
// its orders (what was submitted and cancelled, whether the step drafts), or that it pauses, stops
// or failed; every other rank receives them and takes the same step. A world of one sends nothing.
#pragma once

#include <string>

#include "engine/step_orders.h"
#include "parallel/comm.h"

namespace dsinfer {

class RankChannel {
 public:
  // ranks: the ranks that step together; null or a world of one: alone.
  explicit RankChannel(Comm* ranks);

  bool alone() const { return ranks_ == nullptr; }
  int rank() const { return rank_; }
  bool leader() const { return rank_ == 0; }

  // Rank 0: sends the orders to every other rank (nothing when alone).
  void send(const StepOrders& orders);
  void send_kind(StepOrders::Kind kind);
  // Another rank: the next orders from rank 0 (an Error for a malformed message, a CommError when
  // the ranks lose each other).
  StepOrders receive();
  // Rank 0 unwinding in the middle of a run: tells the followers waiting for a step, so that they
  // fail instead of waiting for one that never comes; errors on the way are swallowed (the ranks
  // have lost each other already, and their collectives fail on their own).
  void abort_run(const std::string& reason) noexcept;

 private:
  Comm* ranks_ = nullptr;
  int rank_ = 0;
  bool followers_inside_ = false;  // a step was sent since the last pause or stop
};

}  // namespace dsinfer
