// The absorbed MLA cache of sequences: per sequence, per layer and position, the normalised
// latent (kv_lora_rank floats) followed by the rotated shared key part (qk_rope_head_dim
// floats); never full per-head keys and values. The two halves of an entry sit side by side so
// that a sequence's entries are one matrix [positions, kv_lora_rank + qk_rope_head_dim], and
// attention scores are one product with queries laid out the same way ([q_abs | q_pe]).
//
// Capacity is a budget of positions over all sequences, not batch x max_seq_len: a sequence
// reserves the positions it may reach when it is created (its prompt plus the tokens it may
// generate), in blocks of kKVBlock positions, so that admission is a question the scheduler can
// ask before anything runs (can_reserve), and a full cache is backpressure, never a crash.
// A sequence's entries are contiguous (attention reads them as one matrix); sharing a prefix
// copies it (fork), which costs a memory copy of the prefix instead of recomputing it.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/config.h"

namespace dsinfer {

using SeqId = int64_t;
inline constexpr int64_t kKVBlock = 64;  // positions are reserved in blocks of this many

class KVCache {
 public:
  KVCache() = default;
  // A cache that may hold budget_positions positions over all its sequences (rounded up to
  // whole blocks).
  KVCache(const ModelConfig& config, int64_t budget_positions);
  // The reference loop's cache: sequences 0 .. batch-1 of `capacity` positions each, created.
  KVCache(const ModelConfig& config, int batch, int capacity);

  // Floats per entry: kv_lora_rank + qk_rope_head_dim (the row stride of entries).
  int64_t entry_dim() const { return kv_lora_rank_ + rope_dim_; }
  // Bytes one position costs over all layers.
  int64_t bytes_per_position() const { return n_layers_ * entry_dim() * static_cast<int64_t>(sizeof(float)); }

  // Whether a sequence of `capacity` positions fits in what is free now.
  bool can_reserve(int64_t capacity) const;
  // A new empty sequence that may grow to `capacity` positions; an Error (naming the budget)
  // when they do not fit.
  SeqId create(int64_t capacity);
  // A new sequence holding a copy of the first `length` positions of `source`.
  SeqId fork(SeqId source, int64_t length, int64_t capacity);
  void release(SeqId seq);
  // Raises a sequence's capacity (copying its entries when its blocks must move); false, and
  // nothing changed, when the budget has no room for the extra blocks.
  bool grow(SeqId seq, int64_t capacity);
  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }

  // Positions written so far (the forward step sets it as it writes).
  int64_t length(SeqId seq) const { return get(seq).length; }
  int64_t capacity(SeqId seq) const { return get(seq).capacity; }
  void set_length(SeqId seq, int64_t length);
  // Forget positions from `length` on (speculative rollback): cheap, positions are indices.
  void truncate(SeqId seq, int64_t length);

  // [entry_dim] of sequence seq at position pos in layer `layer`: the latent, then the rope key;
  // the entries of one sequence follow each other.
  float* entry(int layer, SeqId seq, int64_t pos) {
    return get(seq).layers[layer].get() + pos * entry_dim();
  }
  const float* entry(int layer, SeqId seq, int64_t pos) const {
    return get(seq).layers[layer].get() + pos * entry_dim();
  }
  // [kv_lora_rank], the first part of an entry
  float* latent(int layer, SeqId seq, int64_t pos) { return entry(layer, seq, pos); }
  // [qk_rope_head_dim], the second part
  float* rope_key(int layer, SeqId seq, int64_t pos) { return entry(layer, seq, pos) + kv_lora_rank_; }

  // The positions a sequence of `positions` reserves: whole blocks.
  static int64_t blocks_of(int64_t positions) { return (positions + kKVBlock - 1) / kKVBlock * kKVBlock; }
  int64_t budget_positions() const { return budget_; }
  int64_t reserved_positions() const { return reserved_; }
  int64_t free_positions() const { return budget_ - reserved_; }
  int64_t n_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  int64_t bytes() const { return reserved_ * bytes_per_position(); }

 private:
  struct Sequence {
    int64_t length = 0, capacity = 0, reserved = 0;
    std::vector<std::unique_ptr<float[]>> layers;  // per layer [reserved, entry_dim]
  };
  Sequence& get(SeqId seq);
  const Sequence& get(SeqId seq) const;

  int n_layers_ = 0;
  int64_t kv_lora_rank_ = 0, rope_dim_ = 0;
  int64_t budget_ = 0, reserved_ = 0;
  SeqId next_id_ = 0;
  std::unordered_map<SeqId, Sequence> seqs_;
};

// The default budget: what fits in `fraction` of the memory this machine has available now
// (MemAvailable), at least one sequence of max_seq_len, at most 2^24 positions.
int64_t default_kv_budget(const ModelConfig& config, double fraction = 0.5);
// A --kv-cache-tokens value: itself when > 0, else default_kv_budget.
inline int64_t kv_budget_or_default(int64_t requested, const ModelConfig& config) {
  return requested > 0 ? requested : default_kv_budget(config);
}

}  // namespace dsinfer
