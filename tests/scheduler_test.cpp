// The step scheduler (src/engine/scheduler.h) without a model: decodes first and never cut,
// prefill in admission order within what the budget leaves, progress when nothing decodes.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsinfer::scheduler_test {
namespace {

TEST(Scheduler, DecodesFirstThenPrefillInOrderWithinTheBudget) {
  // a prompt half prefilled, a decoder with 2 drafts, a fresh prompt, a plain decoder
  const std::vector<ScheduleEntry> running = {{40, 100, 0}, {120, 100, 2}, {0, 50, 0}, {7, 5, 0}};
  std::vector<ScheduledChunk> chunks = schedule_step(running, 64);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].entry, 1u);
  EXPECT_EQ(chunks[0].start, 120);
  EXPECT_EQ(chunks[0].n_tokens, 3);  // its token and two drafts
  EXPECT_TRUE(chunks[0].decode);
  EXPECT_EQ(chunks[1].entry, 3u);
  EXPECT_EQ(chunks[1].n_tokens, 1);
  // 64 - 4 decode tokens: the older prompt takes its remaining 60, the newer one waits
  EXPECT_EQ(chunks[2].entry, 0u);
  EXPECT_EQ(chunks[2].start, 40);
  EXPECT_EQ(chunks[2].n_tokens, 60);
  EXPECT_FALSE(chunks[2].decode);
  // with room for more, the newer prompt takes what is left
  chunks = schedule_step(running, 100);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[3].entry, 2u);
  EXPECT_EQ(chunks[3].start, 0);
  EXPECT_EQ(chunks[3].n_tokens, 36);
}

TEST(Scheduler, ALongPromptIsCutIntoBudgetSizedChunks) {
  std::vector<ScheduleEntry> running = {{0, 1000, 0}};
  int64_t steps = 0;
  while (running[0].prefilling()) {
    const std::vector<ScheduledChunk> chunks = schedule_step(running, 256);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].start, running[0].cached);
    EXPECT_EQ(chunks[0].n_tokens, std::min<int64_t>(256, 1000 - running[0].cached));
    running[0].cached += chunks[0].n_tokens;
    ++steps;
  }
  EXPECT_EQ(steps, 4);
}

TEST(Scheduler, DecodesAreNeverCutAndPrefillStillProgressesWhenNothingDecodes) {
  // more decode tokens than the budget: every decoder runs, no prefill
  std::vector<ScheduleEntry> running = {{10, 5, 3}, {12, 5, 3}, {0, 30, 0}};
  std::vector<ScheduledChunk> chunks = schedule_step(running, 6);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].n_tokens + chunks[1].n_tokens, 8);
  // a budget of 0 with nothing decoding still prefills a token
  chunks = schedule_step(std::vector<ScheduleEntry>{{0, 30, 0}}, 0);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].n_tokens, 1);
  EXPECT_TRUE(schedule_step(std::vector<ScheduleEntry>{}, 256).empty());
}

}  // namespace
}  // namespace dsinfer::scheduler_test
