// The absorbed MLA cache of sequences, in shared blocks: per layer and position, the normalised
// latent (kv_lora_rank values) followed by the rotated shared key part (qk_rope_head_dim values);
// never full per-head keys and values. The two halves of an entry sit side by side so that a
// block's entries in one layer are one matrix [kKVBlock, kv_lora_rank + qk_rope_head_dim], and
// attention scores are one product per block with queries laid out the same way ([q_abs | q_pe]).
//
// Memory is a pool of blocks of kKVBlock positions (all layers of those positions in one
// allocation, [n_layers, kKVBlock, entry_dim]); a sequence is a table of blocks. Blocks carry
// reference counts: sequences that share a prefix hold the same blocks (a block every holder
// leaves as it is: only full blocks of settled positions are shared), so sharing copies nothing;
// only a shared partial block is copied (create_sharing's copy_from). The engine's prefix cache
// (engine/prefix_cache.h) holds references of its own on the blocks it indexes.
//
// Capacity is a budget of blocks over all sequences, not batch x max_seq_len: a sequence takes
// every block it may reach when it is created (its prompt plus the tokens it may generate), so
// that admission is a question the scheduler can ask before anything runs (can_reserve), and a
// full cache is backpressure, never a crash. A block's memory is allocated the first time the
// block is used and kept for reuse.
//
// Element type: fp32 (exact mode's default: the goldens are fp32) or bf16 (half the bytes, as the
// reference demo keeps its cache); entries are rounded to bf16 when written.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/huge_page_memory.h"
#include "kernels/weight_matrix.h"
#include "model/config.h"

namespace dsinfer {

using SeqId = int64_t;
using BlockId = int32_t;
inline constexpr int64_t kKVBlock = 64;  // positions per block
// The largest budget: block ids are int32 (2^37 positions; V3 would need 18 PB of them).
inline constexpr int64_t kMaxKVPositions = (int64_t{1} << 31) * kKVBlock - kKVBlock;

enum class KVDType { kF32, kBF16 };
const char* kv_dtype_name(KVDType dtype);
KVDType parse_kv_dtype(const std::string& name);  // "f32" | "bf16"; else an Error naming the value

class KVCache {
 public:
  KVCache() = default;
  // A cache that may hold budget_positions positions over all its sequences (rounded up to
  // whole blocks).
  KVCache(const ModelConfig& config, int64_t budget_positions, KVDType dtype = KVDType::kF32);
  // The reference loop's cache: sequences 0 .. batch-1 of `capacity` positions each, created.
  KVCache(const ModelConfig& config, int batch, int capacity, KVDType dtype = KVDType::kF32);
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;

  KVDType dtype() const { return dtype_; }
  // Values per entry: kv_lora_rank + qk_rope_head_dim (the row length of a block's matrix).
  int64_t entry_dim() const { return kv_lora_rank_ + rope_dim_; }
  // Values per entry's latent (its leading part: what attention's values are made of).
  int64_t latent_dim() const { return kv_lora_rank_; }
  int64_t element_bytes() const { return dtype_ == KVDType::kBF16 ? 2 : 4; }
  // Bytes one position costs over all layers.
  int64_t bytes_per_position() const { return n_layers_ * entry_dim() * element_bytes(); }

  // Blocks a sequence of `positions` positions spans, and those positions rounded up to blocks.
  static int64_t blocks_for(int64_t positions) { return (positions + kKVBlock - 1) / kKVBlock; }
  static int64_t blocks_of(int64_t positions) { return blocks_for(positions) * kKVBlock; }

  // Whether a new sequence of `capacity` positions, the first `shared_blocks` blocks of them
  // shared, fits in the blocks free now.
  bool can_reserve(int64_t capacity, int64_t shared_blocks = 0) const;
  // A new empty sequence that may grow to `capacity` positions; an Error (naming the budget)
  // when its blocks are not free.
  SeqId create(int64_t capacity);
  // A new sequence whose first blocks are `shared` (each gains a reference; their positions are
  // the sequence's first shared.size() * kKVBlock), followed by the first `copy_positions`
  // positions of block `copy_from` copied into a block of its own (-1, 0: none), so that it holds
  // shared.size() * kKVBlock + copy_positions positions; it may grow to `capacity`.
  SeqId create_sharing(std::span<const BlockId> shared, BlockId copy_from, int64_t copy_positions,
                       int64_t capacity);
  // A new sequence holding the first `length` positions of `source`: its full blocks shared, the
  // rest of them copied.
  SeqId fork(SeqId source, int64_t length, int64_t capacity);
  void release(SeqId seq);
  // Raises a sequence's capacity (new blocks appended: nothing moves); false, and nothing
  // changed, when the extra blocks are not free.
  bool grow(SeqId seq, int64_t capacity);
  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }

  // Positions written so far (the forward step sets it as it writes).
  int64_t length(SeqId seq) const { return get(seq).length; }
  int64_t capacity(SeqId seq) const { return get(seq).capacity; }
  void set_length(SeqId seq, int64_t length);
  // Forget positions from `length` on (speculative rollback): cheap, positions are indices.
  void truncate(SeqId seq, int64_t length);

  // The sequence's block table: block i holds positions [i * kKVBlock, (i + 1) * kKVBlock).
  std::span<const BlockId> blocks(SeqId seq) const { return get(seq).table; }
  // Puts `block` (which holds the same entries: the prefix cache's copy of a block this sequence
  // computed) in place of block `index` of the sequence, which drops its own.
  void replace_block(SeqId seq, int64_t index, BlockId block);
  // References held outside sequences (the prefix cache's).
  void retain_block(BlockId block);
  void release_block(BlockId block);
  int refs(BlockId block) const { return refs_.at(static_cast<size_t>(block)); }

  // Writes position `pos` of a sequence in one layer: latent [kv_lora_rank], rope key
  // [qk_rope_head_dim] (rounded to bf16 in a bf16 cache). The position must lie in a block of
  // the sequence's own (never a shared one).
  void write_entry(int layer, SeqId seq, int64_t pos, const float* latent, const float* rope_key);
  // The entries of positions [i * kKVBlock, i * kKVBlock + rows) of a sequence in one layer, in
  // place: a matrix [rows, entry_dim] of the cache's element type (attention's operand).
  WeightMatrix block_entries(int layer, SeqId seq, int64_t block_index, int64_t rows) const;
  // The same of a block by id.
  WeightMatrix block_matrix(int layer, BlockId block, int64_t rows) const;
  // Position `pos`'s entry in one layer as fp32 [entry_dim] (tests, the bf16 copy of prefill).
  void read_entry(int layer, SeqId seq, int64_t pos, float* out) const;

  int64_t budget_positions() const { return total_blocks_ * kKVBlock; }
  int64_t total_blocks() const { return total_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Blocks held by sequences or the prefix cache, and their positions and bytes.
  int64_t used_blocks() const { return total_blocks_ - free_blocks(); }
  int64_t reserved_positions() const { return used_blocks() * kKVBlock; }
  int64_t free_positions() const { return free_blocks() * kKVBlock; }
  int64_t bytes() const { return used_blocks() * block_bytes(); }
  int64_t budget_bytes() const { return total_blocks_ * block_bytes(); }
  int64_t n_sequences() const { return static_cast<int64_t>(seqs_.size()); }

 private:
  struct Sequence {
    int64_t length = 0, capacity = 0;
    std::vector<BlockId> table;
  };
  Sequence& get(SeqId seq);
  const Sequence& get(SeqId seq) const;
  int64_t block_bytes() const { return n_layers_ * kKVBlock * entry_dim() * element_bytes(); }
  // The start of position `slot` of a block in one layer.
  uint8_t* slot(BlockId block, int layer, int64_t slot) const;
  BlockId take_block();
  void drop_ref(BlockId block);

  int n_layers_ = 0;
  int64_t kv_lora_rank_ = 0, rope_dim_ = 0;
  KVDType dtype_ = KVDType::kF32;
  int64_t total_blocks_ = 0;
  // The blocks' memory: chunks of blocks_per_chunk_ blocks in huge pages, each mapped (zero-filled)
  // when its first block is taken.
  int64_t blocks_per_chunk_ = 1;
  std::vector<HugePageMemory> chunks_;
  std::vector<int32_t> refs_;  // per block
  std::vector<BlockId> free_;  // a stack: the lowest ids on top
  SeqId next_id_ = 0;
  std::unordered_map<SeqId, Sequence> seqs_;
};

// The default budget: what fits in `fraction` of the memory this machine has available now
// (MemAvailable), at least one sequence of max_seq_len, at most 2^24 positions.
int64_t default_kv_budget(const ModelConfig& config, KVDType dtype = KVDType::kF32,
                          double fraction = 0.5);
// A --kv-cache-tokens value: itself when > 0, else default_kv_budget.
inline int64_t kv_budget_or_default(int64_t requested, const ModelConfig& config,
                                    KVDType dtype = KVDType::kF32) {
  return requested > 0 ? requested : default_kv_budget(config, dtype);
}

}  // namespace dsinfer
