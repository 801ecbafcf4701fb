// Scoring on the engine: every position's logits of given token sequences (no sampling), each
// sequence one request prefilled whole, all of them in one step. Batch invariance makes these the
// bits of the reference's token-at-a-time loop. Every rank calls it with the same sequences and
// gets the same rows (the lockstep front ends: eval, perplexity).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"

namespace dsinfer {

// on_logits(sequence index, input position, logits [vocab]) for every position of every sequence;
// the row at position p predicts the token at p + 1. Bad sequences are an Error on every rank.
// kv_dtype: the KV cache's element type (bf16 rounds every entry as it is written). step_tokens:
// at most this many positions per step (0: all in one), which bounds the logits held at once to
// step_tokens x vocab floats; the rows are the same bits either way (batch invariance).
void score_sequences(
    Transformer& model, const std::vector<std::vector<int32_t>>& sequences,
    const std::function<void(int sequence, int64_t position, const float* logits)>& on_logits,
    KVDType kv_dtype = KVDType::kF32, int64_t step_tokens = 0);

}  // namespace dsinfer
