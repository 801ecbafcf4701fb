// The tokens a step's logits rows draw (engine/sampling.h), from whole rows or, when the step
// kept each rank's slice of the vocabulary (Step::gather_logits false), from every rank's best
// candidate of its slice: one all_gather of 12 bytes per row and rank instead of the vocabulary's
// 4 bytes per id (258 KB a row and rank at mp2 for V3's 129280 ids). The winner is the token the
// whole row gives, bit for bit, so a sequence's tokens do not depend on which path its step took.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampling.h"
#include "model/step.h"
#include "parallel/comm.h"

namespace dsinfer {

struct RowDraw {
  int64_t row = 0;                         // a row of the step's logits
  const SamplingParams* params = nullptr;  // race_splits_over_vocab(*params) for a slice
  int64_t position = 0;                    // where the token will sit (keys its stream)
  TokenHistory history;  // what adjust_logits reads (when adjusts_logits(*params))
  // Structured output: the ids that may be drawn (engine/token_constraint.h's bitmask over the
  // whole vocabulary); every other id is -infinity after the adjustments. null: no mask.
  const uint32_t* allowed = nullptr;
};

// The token of a row whose logits hold a NaN or +infinity (overflowing weights or config): no
// draw; the request ends with an error (on every rank alike: a slice's verdict is gathered).
// -infinity is a masked id and draws as before.
inline constexpr int32_t kNoTokenFromNonFiniteLogits = -1;

// draws[i]'s token at [i], or kNoTokenFromNonFiniteLogits. Rows whose parameters adjust the logits
// (penalties, logit_bias, min_tokens) or that carry a mask are drawn from an adjusted copy. `ranks`
// is the model's (its world holds the slices); every rank calls this with the same draws, which is
// a collective only for sliced logits at world > 1.
// `pool`: the rows are drawn on its threads (the same tokens; the engine passes the model's, idle
// between forward passes).
std::vector<int32_t> draw_tokens(const StepOutput& out, int64_t vocab,
                                 const std::vector<RowDraw>& draws, Comm& ranks,
                                 ThreadPool* pool = nullptr);

}  // namespace dsinfer
