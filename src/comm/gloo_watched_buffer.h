// A gloo unbound buffer whose send waits the peer watch can end (comm/peer_watch.h): gloo's
// collectives take it in place of the buffer it wraps and call only its virtual interface, while
// the transport sees the wrapped buffer (send and recv pass it on).
//
// gloo's collectives ignore what a wait returns, so an aborted wait is settled here: once the watch
// has aborted it, the wait is tried again for a millisecond. A send that had completed (the peer
// got its bytes, then ended) returns at once and the collective goes on; a send that can no longer
// complete times out, which gloo turns into an exception (it closes the context's pairs: this rank
// is failing anyway) and GlooComm reports as the lost rank.
#pragma once

#ifdef DSINFER_HAVE_GLOO
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <memory>
#include <utility>

#include "comm/peer_watch.h"

namespace dsinfer {

class WatchedBuffer : public gloo::transport::UnboundBuffer {
 public:
  WatchedBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner, PeerWatch* watch)
      : UnboundBuffer(inner->ptr, inner->size),
        inner_(std::move(inner)),
        watch_(watch),
        in_flight_(watch, [this] { inner_->abortWaitSend(); }) {}

  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    if (inner_->waitSend(rank, timeout)) return true;
    if (!watch_ || watch_->dead_rank() < 0) return false;
    return inner_->waitSend(rank, std::chrono::milliseconds(1));
  }
  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    return inner_->waitRecv(rank, timeout);
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
  PeerWatch* watch_;
  PeerWatch::InFlight in_flight_;  // last: unregistered before inner_ goes
};

// A watched buffer over `bytes` at `data` on `ctx`.
template <class Context>
std::unique_ptr<gloo::transport::UnboundBuffer> watched_buffer(Context& ctx, void* data,
                                                               size_t bytes, PeerWatch* watch) {
  return std::make_unique<WatchedBuffer>(ctx.createUnboundBuffer(data, bytes), watch);
}

}  // namespace dsinfer
#endif
