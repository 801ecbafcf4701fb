// gloo's all_reduce algorithms and which one serves a vector of a given size. gloo offers ring and
// bcube through its options API (per-call buffers) and halving-doubling and chunked ring as the
// older algorithm objects (buffers registered once, then run() per call). DSINFER_GLOO_ALLREDUCE
// forces one; `auto` (the default) picks by size and world size from the measurements in
// bench/README.md ("Collective algorithms"). Every algorithm leaves the same bits on every rank; at
// two ranks they all give the same bits (a + b), beyond two the summation order, hence the last
// bit, depends on the algorithm.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo {
class Context;
}

namespace dsinfer {

class PeerWatch;

enum class GlooAllreduce { kAuto, kRing, kBcube, kHalvingDoubling, kRingChunked };

// "auto", "ring", "bcube", "halving-doubling", "ring-chunked"; anything else is an Error naming
// the value and the choices.
GlooAllreduce parse_gloo_allreduce(const std::string& name);
const char* gloo_allreduce_name(GlooAllreduce a);

// What `auto` runs for n floats at this world size (never kAuto).
GlooAllreduce auto_gloo_allreduce(int64_t n, int world);

// Lengths up to this many floats go to the registered halving-doubling object under `auto`.
constexpr int64_t kRegisteredMaxFloats = 64 * 1024;
// Registered objects serve power-of-two buckets of lengths from this one up (padded with zeros).
constexpr int64_t kSmallestBucketFloats = 1024;

#ifdef DSINFER_HAVE_GLOO
// Runs each all_reduce with the chosen algorithm: the options-API ones on the comm's context, the
// registered objects on a context of their own (same ranks, other connections).
class GlooAllreducer {
 public:
  // `watch` (may be null) aborts the options-API algorithms' sends once a peer died
  // (comm/peer_watch.h); the registered objects' bound buffers need no such help.
  GlooAllreducer(std::shared_ptr<gloo::Context> ctx, std::shared_ptr<gloo::Context> registered_ctx,
                 std::chrono::milliseconds timeout, GlooAllreduce forced, PeerWatch* watch);
  ~GlooAllreducer();
  GlooAllreduce choice(int64_t n) const;
  // data[n] = the sum over ranks, in place; `tag` is used by the options-API algorithms.
  void run(float* data, int64_t n, uint32_t tag);

 private:
  struct Registered;
  Registered& registered_for(int64_t n, GlooAllreduce a);
  std::shared_ptr<gloo::Context> ctx_, registered_ctx_;
  std::chrono::milliseconds timeout_;
  GlooAllreduce forced_;
  PeerWatch* watch_;
  std::vector<std::unique_ptr<Registered>> registered_;  // at most one per bucket and algorithm
};
#endif

}  // namespace dsinfer
