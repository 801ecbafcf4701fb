// The reference's generation loop (generate.py: generate, docs/REFERENCE.md section 5): one forward
// over [0, shortest prompt), then one position at a time for all rows together; a row still
// inside its prompt takes its prompt token; stop when every row has produced eos.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/sampler.h"
#include "model/transformer.h"

namespace dsinfer {

struct GenerateOptions {
  int max_new_tokens = 200;
  int eos_id = -1;           // -1: never stops early
  float temperature = 0.2f;  // 0: greedy
  // 0: the reference's lockstep (every prompt at once, at most max_batch_size of them, prefilled
  // whole). N > 0: continuous batching, any number of prompts, at most N running at once: the
  // next prompt joins as soon as one finishes. Batch invariance makes the completions the same.
  int max_running = 0;
  int64_t step_tokens = 0;  // with max_running: the step's token budget (chunked prefill); 0: 256
  bool mtp = false;       // speculative decoding with the model's MTP module (loaded): same tokens
  bool mtp_auto = false;  // with mtp: draft only where it measured faster (EngineOptions::mtp_auto)
  int draft_tokens = 1;   // with mtp: drafts per sequence and step
  KVDType kv_dtype = KVDType::kF32;  // the KV cache's element type (--kv-cache-dtype)
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t drafted = 0, accepted = 0;  // MTP drafts verified and accepted
  int64_t decode_row_steps = 0,
          decoded_tokens = 0;  // EngineStats': their ratio is the drafts' gain
};

// Called for each newly generated (not prompt) token of a row, in order.
using TokenCallback = std::function<void(int row, int32_t token)>;

// Returns each row's completion: cut to max_new_tokens and at its first eos. Throws Error when
// there are more prompts than max_batch_size (lockstep only), a prompt is empty or longer than
// max_seq_len, or a token id is outside the vocabulary. Every rank calls it with the same prompts
// and gets the same completions.
std::vector<std::vector<int32_t>> generate(Transformer& model,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options, Sampler& sampler,
                                           const TokenCallback& on_token = nullptr,
                                           GenerateStats* stats = nullptr);

// Checks the batch limits generate() enforces (shared with other front ends); max_batch_size only
// when `lockstep`.
void check_prompts(const ModelConfig& config, const std::vector<std::vector<int32_t>>& prompts,
                   bool lockstep = true);

}  // namespace dsinfer
