// One forward call over any mix of sequences (docs/ENGINE.md: the ragged step). Each chunk is some
// consecutive positions of one sequence: a prefill piece or a single decode token. Embedding,
// norms, MLP and MoE run on the flat rows of all chunks; RoPE, cache writes and attention per
// chunk at its absolute positions; the head only on the rows asked for.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace dsinfer {

struct SeqChunk {
  SeqId seq = 0;
  int64_t start_pos = 0;  // the sequence's cache must hold exactly start_pos positions
  int64_t n_tokens = 0;
  bool all_logits = false;  // logits of every row of the chunk, else of its last row only
  bool all_hidden = false;  // with Step::want_hidden: the hidden state of every row (MTP's input)
};

struct Step {
  std::vector<int32_t> tokens;  // the tokens of all chunks, concatenated in chunk order
  std::vector<SeqChunk> chunks;
  // Also return the final-norm hidden state: per chunk of every row when all_logits or
  // all_hidden, else of its last row.
  bool want_hidden = false;
  // false skips the head (e.g. an MTP step that only fills its cache): no logits
  bool want_logits = true;
  // false: StepOutput::logits keeps this rank's slice of the vocabulary instead of gathering every
  // rank's (the caller combines per-rank results itself, e.g. the engine's vocab-parallel draw:
  // a few bytes a row instead of the vocabulary)
  bool gather_logits = true;
  void add(SeqId seq, int64_t start_pos, const int32_t* ids, int64_t n, bool all_logits = false) {
    chunks.push_back({seq, start_pos, n, all_logits});
    tokens.insert(tokens.end(), ids, ids + n);
  }
  // Rows of logits the step returns: per chunk its n_tokens or 1.
  int64_t logit_rows() const {
    int64_t rows = 0;
    for (const SeqChunk& c : chunks) rows += c.all_logits ? c.n_tokens : 1;
    return rows;
  }
  // Rows of hidden state it returns when want_hidden.
  int64_t hidden_rows() const {
    int64_t rows = 0;
    for (const SeqChunk& c : chunks) rows += c.all_logits || c.all_hidden ? c.n_tokens : 1;
    return rows;
  }
};

struct StepOutput {
  // [logit_rows, logit_columns], chunk by chunk: the whole vocabulary (gathered over ranks), or
  // with Step::gather_logits false this rank's ids vocab_offset .. vocab_offset + logit_columns - 1
  std::vector<float> logits;
  int64_t logit_columns = 0;
  int64_t vocab_offset = 0;
  std::vector<float> hidden;  // [hidden_rows, dim] when the step wanted it (MTP's input)
};

}  // namespace dsinfer
