#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer {

const char* kv_dtype_name(KVDType dtype) { return dtype == KVDType::kBF16 ? "bf16" : "f32"; }

KVDType parse_kv_dtype(const std::string& name) {
  if (name == "f32") return KVDType::kF32;
  if (name == "bf16") return KVDType::kBF16;
  fail("unknown KV cache dtype '", name, "' (f32 or bf16)");
}

KVCache::KVCache(const ModelConfig& c, int64_t budget_positions, KVDType dtype)
    : n_layers_(c.n_layers),
      kv_lora_rank_(c.kv_lora_rank),
      rope_dim_(c.qk_rope_head_dim),
      dtype_(dtype) {
  check(budget_positions >= 0 && budget_positions <= kMaxKVPositions, "KV cache budget of ",
        budget_positions, " positions is outside [0, ", kMaxKVPositions, "]");
  // a budget of n positions always holds a sequence of n
  total_blocks_ = blocks_for(budget_positions);
  // chunks of ~32 MB: whole huge pages with little rounding, mapped a few at a time as used
  blocks_per_chunk_ = std::max<int64_t>(1, (int64_t{32} << 20) / block_bytes());
  chunks_.resize(static_cast<size_t>(ceil_div(total_blocks_, blocks_per_chunk_)));
  refs_.assign(static_cast<size_t>(total_blocks_), 0);
  free_.reserve(static_cast<size_t>(total_blocks_));
  for (int64_t b = total_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<BlockId>(b));
}

KVCache::KVCache(const ModelConfig& c, int batch, int capacity, KVDType dtype)
    : KVCache(c, static_cast<int64_t>(batch) * blocks_of(capacity), dtype) {
  for (int b = 0; b < batch; ++b) create(capacity);
}

bool KVCache::can_reserve(int64_t capacity, int64_t shared_blocks) const {
  return capacity >= 0 && blocks_for(capacity) - shared_blocks <= free_blocks();
}

BlockId KVCache::take_block() {
  check(!free_.empty(), "KV cache: no free block");  // callers check first: a bug if it happens
  const BlockId b = free_.back();
  free_.pop_back();
  // a chunk is zero-filled when mapped, so that nothing ever reads an uninitialised value
  HugePageMemory& chunk = chunks_[static_cast<size_t>(b / blocks_per_chunk_)];
  if (chunk.empty()) {
    const int64_t first = b / blocks_per_chunk_ * blocks_per_chunk_;
    chunk = HugePageMemory(std::min(blocks_per_chunk_, total_blocks_ - first) * block_bytes());
  }
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KVCache::drop_ref(BlockId b) {
  int32_t& r = refs_.at(static_cast<size_t>(b));
  check(r > 0, "KV cache: block ", b, " released more often than held");
  if (--r == 0) free_.push_back(b);
}

SeqId KVCache::create(int64_t capacity) { return create_sharing({}, -1, 0, capacity); }

SeqId KVCache::create_sharing(std::span<const BlockId> shared, BlockId copy_from,
                              int64_t copy_positions, int64_t capacity) {
  check(capacity >= 0, "KV cache: a sequence needs capacity >= 0, got ", capacity);
  const int64_t n_shared = static_cast<int64_t>(shared.size());
  if (copy_from < 0) copy_positions = 0;
  check(copy_positions >= 0 && copy_positions < kKVBlock, "KV cache: cannot copy ", copy_positions,
        " positions of a block");
  const int64_t length = n_shared * kKVBlock + copy_positions;
  check(capacity >= length, "KV cache: capacity ", capacity, " below the shared length ", length);
  const int64_t blocks = std::max(blocks_for(capacity), n_shared);
  check(blocks - n_shared <= free_blocks(), "KV cache full: a sequence of ", capacity,
        " positions does not fit (", free_positions(), " of ", budget_positions(),
        " positions free; --kv-cache-tokens sets the budget)");
  Sequence s;
  s.capacity = capacity;
  s.length = length;
  s.table.assign(shared.begin(), shared.end());
  for (BlockId b : shared) {
    check(refs(b) > 0, "KV cache: block ", b, " is shared but held by nobody");
    ++refs_[static_cast<size_t>(b)];
  }
  while (static_cast<int64_t>(s.table.size()) < blocks) s.table.push_back(take_block());
  if (copy_positions > 0) {
    const BlockId dst = s.table[static_cast<size_t>(n_shared)];
    const int64_t row_bytes = entry_dim() * element_bytes();
    for (int l = 0; l < n_layers_; ++l)
      std::memcpy(slot(dst, l, 0), slot(copy_from, l, 0),
                  static_cast<size_t>(copy_positions * row_bytes));
  }
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(s));
  return id;
}

SeqId KVCache::fork(SeqId source, int64_t length, int64_t capacity) {
  const Sequence& src = get(source);
  check(length >= 0 && length <= src.length, "KV cache fork: ", length,
        " positions of a sequence holding ", src.length);
  const int64_t full = length / kKVBlock, rest = length % kKVBlock;
  const std::vector<BlockId> shared(src.table.begin(), src.table.begin() + full);
  return create_sharing(shared, rest > 0 ? src.table[static_cast<size_t>(full)] : -1, rest,
                        capacity);
}

bool KVCache::grow(SeqId seq, int64_t capacity) {
  Sequence& s = get(seq);
  if (capacity <= s.capacity) return true;
  const int64_t extra = blocks_for(capacity) - static_cast<int64_t>(s.table.size());
  if (extra > free_blocks()) return false;
  for (int64_t i = 0; i < extra; ++i) s.table.push_back(take_block());
  s.capacity = capacity;
  return true;
}

void KVCache::release(SeqId seq) {
  for (BlockId b : get(seq).table) drop_ref(b);
  seqs_.erase(seq);
}

void KVCache::set_length(SeqId seq, int64_t length) {
  Sequence& s = get(seq);
  check(length >= 0 && length <= s.capacity, "KV cache: position ", length,
        " is past the sequence's capacity ", s.capacity);
  s.length = length;
}

void KVCache::truncate(SeqId seq, int64_t length) {
  Sequence& s = get(seq);
  check(length >= 0 && length <= s.length, "KV cache truncate: ", length, " of ", s.length,
        " positions");
  s.length = length;
}

void KVCache::replace_block(SeqId seq, int64_t index, BlockId block) {
  Sequence& s = get(seq);
  check(index >= 0 && index < static_cast<int64_t>(s.table.size()), "KV cache: no block ", index,
        " in sequence ", seq);
  BlockId& slot_id = s.table[static_cast<size_t>(index)];
  if (slot_id == block) return;
  retain_block(block);
  drop_ref(slot_id);
  slot_id = block;
}

void KVCache::retain_block(BlockId block) {
  check(block >= 0 && block < total_blocks_ && refs(block) > 0, "KV cache: block ", block,
        " is not in use");
  ++refs_[static_cast<size_t>(block)];
}

void KVCache::release_block(BlockId block) { drop_ref(block); }

uint8_t* KVCache::slot(BlockId block, int layer, int64_t s) const {
  return chunks_[static_cast<size_t>(block / blocks_per_chunk_)].data() +
         (block % blocks_per_chunk_) * block_bytes() +
         ((layer * kKVBlock) + s) * entry_dim() * element_bytes();
}

void KVCache::write_entry(int layer, SeqId seq, int64_t pos, const float* latent,
                          const float* rope_key) {
  const Sequence& s = get(seq);
  check(pos >= 0 && pos < s.capacity, "KV cache: position ", pos,
        " is past the sequence's capacity ", s.capacity);
  const BlockId b = s.table[static_cast<size_t>(pos / kKVBlock)];
  // a shared block is everyone's: writing it would change other sequences' entries
  check(refs(b) == 1, "KV cache: position ", pos, " of sequence ", seq, " lies in a shared block");
  uint8_t* dst = slot(b, layer, pos % kKVBlock);
  if (dtype_ == KVDType::kF32) {
    float* d = reinterpret_cast<float*>(dst);
    std::copy_n(latent, kv_lora_rank_, d);
    std::copy_n(rope_key, rope_dim_, d + kv_lora_rank_);
  } else {
    uint16_t* d = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < kv_lora_rank_; ++i) d[i] = f32_to_bf16(latent[i]);
    for (int64_t i = 0; i < rope_dim_; ++i) d[kv_lora_rank_ + i] = f32_to_bf16(rope_key[i]);
  }
}

WeightMatrix KVCache::block_matrix(int layer, BlockId block, int64_t rows) const {
  return {dtype_ == KVDType::kBF16 ? DType::kBF16 : DType::kF32, rows, entry_dim(),
          slot(block, layer, 0), nullptr};
}

WeightMatrix KVCache::block_entries(int layer, SeqId seq, int64_t block_index, int64_t rows) const {
  return block_matrix(layer, get(seq).table[static_cast<size_t>(block_index)], rows);
}

void KVCache::read_entry(int layer, SeqId seq, int64_t pos, float* out) const {
  const uint8_t* src =
      slot(get(seq).table[static_cast<size_t>(pos / kKVBlock)], layer, pos % kKVBlock);
  if (dtype_ == KVDType::kF32) {
    std::copy_n(reinterpret_cast<const float*>(src), entry_dim(), out);
  } else {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < entry_dim(); ++i) out[i] = bf16_to_f32(s[i]);
  }
}

KVCache::Sequence& KVCache::get(SeqId seq) {
  auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KV cache: no sequence ", seq);
  return it->second;
}

const KVCache::Sequence& KVCache::get(SeqId seq) const {
  auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KV cache: no sequence ", seq);
  return it->second;
}

int64_t default_kv_budget(const ModelConfig& c, KVDType dtype, double fraction) {
  int64_t available_kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    int64_t value = 0;
    meminfo >> value;
    if (key == "MemAvailable:") {
      available_kb = value;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  const int64_t element = dtype == KVDType::kBF16 ? 2 : 4;
  const int64_t per_position =
      static_cast<int64_t>(c.n_layers) * (c.kv_lora_rank + c.qk_rope_head_dim) * element;
  const int64_t fits = static_cast<int64_t>(static_cast<double>(available_kb) * 1024.0 * fraction) /
                       std::max<int64_t>(per_position, 1);
  return std::clamp<int64_t>(fits, c.max_seq_len, int64_t{1} << 24);
}

}  // namespace dsinfer
