// Speculative decoding with the checkpoint's multi-token-prediction module (docs/MTP.md): the MTP
// module's own cache, each sequence's speculation state, and the drafting after a main step. A
// draft only decides how many tokens a verify step may take, never which (each position is
// sampled from its own stream), so the tokens are those of a run without it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"
#include "model/step.h"
#include "model/transformer.h"

namespace dsinfer {

// One sequence's speculation: its sequence in the MTP cache, which holds the positions whose next
// token and main hidden state are known (all of the main cache's after a step that drafts, the
// rest waiting in pending_hidden; chained drafts write past them, dropped at the next step), and
// the MTP's guesses of the tokens after the last one generated.
struct Speculation {
  SeqId mtp_seq = -1;
  int64_t mtp_cached = 0;
  std::vector<int32_t> drafts;
  std::vector<float>
      pending_hidden;       // [main cached - mtp_cached, dim] rows the MTP has yet to take
  int64_t mtp_indexed = 0;  // its first full blocks whose MTP blocks the prefix index holds
};

// A sequence in the drafting after a step: its state, the main cache's settled positions, and how
// many drafts it may still use (its length and room allowing); prefilling ones only catch up.
struct DraftTarget {
  Speculation* spec;
  int64_t cached = 0;
  bool prefilling = false;
  int64_t max_drafts = 0;
};

class Speculator {
 public:
  // The MTP cache mirrors the main one: the same budget and element type.
  Speculator(Transformer& model, const KVCache& main_cache, int draft_tokens);
  KVCache& cache() { return cache_; }

  // After a main step: the catch-up over every target's settled positions (`catch_up`, with
  // `hidden` [its rows, dim] the main model's hidden states there), whose last rows draft each
  // decoding target's next token, then draft_tokens - 1 chained steps of the module on its own
  // drafts. With `draft` false (rank 0's call under --mtp auto) the catch-up only fills the cache.
  void draft(Step& catch_up, const std::vector<float>& hidden, std::vector<DraftTarget>& targets,
             bool draft);

 private:
  Transformer& model_;
  KVCache cache_;
  int draft_tokens_;
};

}  // namespace dsinfer
