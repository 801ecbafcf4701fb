#include "engine/draft_policy.h"

#include <algorithm>

namespace dsinfer {

namespace {
constexpr int64_t kMaxBucket = 256;   // batches larger than this share one timing
constexpr double kStepWeight = 0.2;   // of the newest step in the timing averages
constexpr double kDraftWeight = 0.1;  // of the newest cycle in the gain average
constexpr int64_t kExploreEvery = 64;
}  // namespace

DraftPolicy::Timing& DraftPolicy::timing(int64_t decoding) {
  const size_t b = static_cast<size_t>(std::clamp<int64_t>(decoding, 0, kMaxBucket));
  if (timing_.size() <= b) timing_.resize(b + 1);
  return timing_[b];
}

bool DraftPolicy::should_draft(int64_t decoding) {
  if (decoding <= 0) return false;
  const Timing& t = timing(decoding);
  if (t.plain == 0) return false;  // measure both ways first
  if (t.drafting == 0) return true;
  const bool faster = (1 + gain_) / t.drafting > 1 / t.plain;
  return ++decisions_ % kExploreEvery == 0 ? !faster : faster;
}

void DraftPolicy::record_step(int64_t decoding, bool drafted, double seconds) {
  if (decoding <= 0) return;
  Timing& t = timing(decoding);
  double& mean = drafted ? t.drafting : t.plain;
  mean = mean == 0 ? seconds : mean + kStepWeight * (seconds - mean);
}

void DraftPolicy::record_cycle(int accepted) { gain_ += kDraftWeight * (accepted - gain_); }

}  // namespace dsinfer
