#include "engine/rank_channel.h"

#include "core/error.h"

namespace dsinfer {

RankChannel::RankChannel(Comm* ranks) {
  if (ranks && ranks->world_size() > 1) {
    ranks_ = ranks;
    rank_ = ranks->rank();
  }
}

void RankChannel::send(const StepOrders& orders) {
  if (!ranks_) return;
  check(leader(), "engine: only rank 0 sends orders; rank ", rank_, " follows");
  std::string bytes = encode_orders(orders);
  ranks_->broadcast(bytes, 0);
  followers_inside_ = orders.kind == StepOrders::Kind::kStep;
}

void RankChannel::send_kind(StepOrders::Kind kind) {
  StepOrders orders;
  orders.kind = kind;
  send(orders);
}

StepOrders RankChannel::receive() {
  check(ranks_ && !leader(), "engine: only ranks other than 0 receive orders");
  std::string bytes;
  ranks_->broadcast(bytes, 0);
  return decode_orders(bytes);
}

void RankChannel::abort_run(const std::string& reason) noexcept {
  if (!ranks_ || !leader() || !followers_inside_) return;
  try {
    StepOrders abort;
    abort.kind = StepOrders::Kind::kAbort;
    abort.reason = reason;
    send(abort);
  } catch (...) {
  }
}

}  // namespace dsinfer
