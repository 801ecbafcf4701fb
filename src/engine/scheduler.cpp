#include "engine/scheduler.h"

#include <algorithm>

namespace dsinfer {

std::vector<ScheduledChunk> schedule_step(std::span<const ScheduleEntry> running,
                                          int64_t step_tokens) {
  std::vector<ScheduledChunk> chunks;
  int64_t decode_tokens = 0;
  for (size_t i = 0; i < running.size(); ++i) {
    const ScheduleEntry& e = running[i];
    if (e.prefilling()) continue;
    chunks.push_back({i, e.cached, 1 + e.drafts, true});
    decode_tokens += 1 + e.drafts;
  }
  int64_t budget = std::max<int64_t>(step_tokens - decode_tokens, 0);
  if (chunks.empty()) budget = std::max<int64_t>(budget, 1);  // a step always makes progress
  for (size_t i = 0; i < running.size() && budget > 0; ++i) {
    const ScheduleEntry& e = running[i];
    if (!e.prefilling()) continue;
    const int64_t n = std::min(budget, e.prompt_len - e.cached);
    chunks.push_back({i, e.cached, n, false});
    budget -= n;
  }
  return chunks;
}

}  // namespace dsinfer
