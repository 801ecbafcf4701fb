#include "comm/gloo_allreduce.h"

#include "comm/gloo_watched_buffer.h"
#include "core/error.h"

#ifdef DSINFER_HAVE_GLOO
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>

#include <algorithm>
#include <cstring>
#endif

namespace dsinfer {

namespace {

struct Named {
  GlooAllreduce algorithm;
  const char* name;
};
constexpr Named kNames[] = {{GlooAllreduce::kAuto, "auto"},
                            {GlooAllreduce::kRing, "ring"},
                            {GlooAllreduce::kBcube, "bcube"},
                            {GlooAllreduce::kHalvingDoubling, "halving-doubling"},
                            {GlooAllreduce::kRingChunked, "ring-chunked"}};

}  // namespace

GlooAllreduce parse_gloo_allreduce(const std::string& name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.algorithm;
  fail("DSINFER_GLOO_ALLREDUCE=", name,
       " is not one of auto, ring, bcube, halving-doubling, ring-chunked");
}

const char* gloo_allreduce_name(GlooAllreduce a) {
  for (const Named& n : kNames)
    if (a == n.algorithm) return n.name;
  return "?";
}

GlooAllreduce auto_gloo_allreduce(int64_t n, int world) {
  // bench/README.md, "Collective algorithms" (bench/comm_algorithms.sh): for decode vectors (7168
  // and 28672 floats) the registered halving-doubling object is as fast as ring at 2 ranks and
  // ~10x faster at 4 (0.4-0.5 ms against 4.5 ms for 7168 floats: fewer hops, no per-call buffer
  // set-up); from prefill sizes on (458752 floats) it is the slowest, and bcube (one direct
  // exchange) beats ring by ~25% at 2 ranks while ring, moving the fewest bytes, is fastest beyond.
  if (n <= kRegisteredMaxFloats) return GlooAllreduce::kHalvingDoubling;
  return world == 2 ? GlooAllreduce::kBcube : GlooAllreduce::kRing;
}

#ifdef DSINFER_HAVE_GLOO

// An algorithm object registered for one vector length, with the buffer it was registered on.
struct GlooAllreducer::Registered {
  int64_t floats = 0;  // the bucket
  GlooAllreduce algorithm_kind = GlooAllreduce::kHalvingDoubling;
  std::vector<float> buffer;
  std::unique_ptr<gloo::Algorithm> algorithm;
};

GlooAllreducer::GlooAllreducer(std::shared_ptr<gloo::Context> ctx,
                               std::shared_ptr<gloo::Context> registered_ctx,
                               std::chrono::milliseconds timeout, GlooAllreduce forced,
                               PeerWatch* watch)
    : ctx_(std::move(ctx)),
      registered_ctx_(std::move(registered_ctx)),
      timeout_(timeout),
      forced_(forced),
      watch_(watch) {}

GlooAllreducer::~GlooAllreducer() = default;

GlooAllreduce GlooAllreducer::choice(int64_t n) const {
  return forced_ == GlooAllreduce::kAuto ? auto_gloo_allreduce(n, ctx_->size) : forced_;
}

void GlooAllreducer::run(float* data, int64_t n, uint32_t tag) {
  const GlooAllreduce a = choice(n);
  if (a == GlooAllreduce::kRing || a == GlooAllreduce::kBcube) {
    gloo::AllreduceOptions opts(ctx_);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    opts.setInput<float>(watched_buffer(*ctx_, data, bytes, watch_));
    opts.setOutput<float>(watched_buffer(*ctx_, data, bytes, watch_));
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setAlgorithm(a == GlooAllreduce::kRing ? gloo::AllreduceOptions::Algorithm::RING
                                                : gloo::AllreduceOptions::Algorithm::BCUBE);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
    return;
  }
  Registered& r = registered_for(n, a);
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::memcpy(r.buffer.data(), data, bytes);
  std::fill(r.buffer.begin() + n, r.buffer.end(), 0.0f);  // the last call's sums
  r.algorithm->run();
  std::memcpy(data, r.buffer.data(), bytes);
}

// The old algorithm objects take context slots and register their buffers when made (~3 ms
// each), so they are kept and reused: one per power-of-two bucket of lengths, the vector
// zero-padded to its bucket (zeros add nothing to the sum), so however ragged the steps are, at
// most one object per power of two exists. Every rank makes the same calls in the same
// order, so every rank makes the same objects at the same time (keyed by length alone: data
// pointers differ between ranks).
GlooAllreducer::Registered& GlooAllreducer::registered_for(int64_t n, GlooAllreduce a) {
  int64_t bucket = kSmallestBucketFloats;
  while (bucket < n) bucket *= 2;
  for (const auto& r : registered_)
    if (r->floats == bucket && r->algorithm_kind == a) return *r;
  check(bucket <= (int64_t{1} << 30), "gloo all_reduce of ", n, " floats: over gloo's int count");
  auto r = std::make_unique<Registered>();
  r->floats = bucket;
  r->algorithm_kind = a;
  r->buffer.assign(static_cast<size_t>(bucket), 0.0f);
  const std::vector<float*> ptrs{r->buffer.data()};
  const int count = static_cast<int>(bucket);
  if (a == GlooAllreduce::kHalvingDoubling)
    r->algorithm =
        std::make_unique<gloo::AllreduceHalvingDoubling<float>>(registered_ctx_, ptrs, count);
  else
    r->algorithm =
        std::make_unique<gloo::AllreduceRingChunked<float>>(registered_ctx_, ptrs, count);
  registered_.push_back(std::move(r));
  return *registered_.back();
}

#endif

}  // namespace dsinfer
