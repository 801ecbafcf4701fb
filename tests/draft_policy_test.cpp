// DraftPolicy (--mtp auto) on made-up timings: it measures both ways first, drafts where the
// accepted tokens outweigh the dearer step, stops when the acceptance drops or at a batch where
// verifying costs too much, looks the other way every 64th decision, and keeps batches apart.
#include "engine/draft_policy.h"

#include <gtest/gtest.h>

namespace dsinfer::draft_policy_test {
namespace {

// Of n decisions at `decoding` sequences, how many drafted.
int drafts_of(DraftPolicy& p, int64_t decoding, int n) {
  int yes = 0;
  for (int i = 0; i < n; ++i) yes += p.should_draft(decoding);
  return yes;
}

TEST(DraftPolicy, DraftsWhereItPaysAndBacksOffWhenAcceptanceDrops) {
  DraftPolicy p;
  EXPECT_FALSE(p.should_draft(1));  // nothing measured: a plain step first
  p.record_step(1, /*drafted=*/false, 1.0);
  EXPECT_TRUE(p.should_draft(1));  // then a drafting one
  p.record_step(1, /*drafted=*/true, 1.5);
  for (int i = 0; i < 200; ++i) p.record_cycle(i % 10 != 0);  // 90% accepted: 1.9 / 1.5 > 1
  EXPECT_GT(p.gain(), 0.85);
  EXPECT_EQ(drafts_of(p, 1, 128), 126);  // every 64th decision looks the other way
  for (int i = 0; i < 200; ++i) p.record_cycle(i % 5 == 0);  // 20%: 1.2 / 1.5 < 1
  EXPECT_LT(p.gain(), 0.3);
  EXPECT_EQ(drafts_of(p, 1, 128), 2);
  EXPECT_FALSE(p.should_draft(0));
}

TEST(DraftPolicy, EachBatchSizeHasItsOwnTimings) {
  DraftPolicy p;
  for (int i = 0; i < 100; ++i) p.record_cycle(1);
  p.record_step(1, false, 1.0);
  p.record_step(1, true, 1.2);  // batch 1: 2 tokens for 1.2 steps
  p.record_step(8, false, 2.0);
  p.record_step(8, true, 4.5);  // batch 8: the union of experts makes verifying dear
  EXPECT_GE(drafts_of(p, 1, 32), 30);
  EXPECT_LE(drafts_of(p, 8, 32), 2);
  EXPECT_FALSE(p.should_draft(4));  // not measured at 4 yet
  // timings follow the load: drafting at batch 8 gets cheap, the policy turns it on
  for (int i = 0; i < 30; ++i) p.record_step(8, true, 2.1);
  EXPECT_GE(drafts_of(p, 8, 32), 30);
}

}  // namespace
}  // namespace dsinfer::draft_policy_test
