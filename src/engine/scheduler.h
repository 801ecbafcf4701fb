// Which tokens the next forward step takes: a pure function of the running sequences' state and
// the step's token budget, so the policy is tested without a model (tests/scheduler_test.cpp).
// Every decoding sequence first (its next token, and the drafts it may verify), so running streams
// never wait behind a prompt; then prefill chunks in admission order within what the budget
// leaves; a step with nothing decoding always makes prefill progress (one token at least).
// Admission (which waiting request gets cache blocks) is the engine's, as it maps cached
// prefixes and evicts (engine/prefix_cache.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsinfer {

// A running sequence as the scheduler sees it.
struct ScheduleEntry {
  int64_t cached = 0;      // positions in its cache
  int64_t prompt_len = 0;  // prefilling while cached < prompt_len
  int64_t drafts = 0;      // decoding: drafted tokens it may verify this step
  bool prefilling() const { return cached < prompt_len; }
};

// One chunk of the step: `n_tokens` positions of running sequence `entry` from position `start`
// (a decode chunk: its next token, then its drafts).
struct ScheduledChunk {
  size_t entry = 0;
  int64_t start = 0;
  int64_t n_tokens = 0;
  bool decode = false;
};

// The chunks of the next step, decode chunks first (in `running` order), then prefill chunks.
// Decode chunks are never cut by the budget; prefill takes what it leaves (at least one token
// when nothing decodes).
std::vector<ScheduledChunk> schedule_step(std::span<const ScheduleEntry> running,
                                          int64_t step_tokens);

}  // namespace dsinfer
