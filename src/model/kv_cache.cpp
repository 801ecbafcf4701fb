#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace dsinfer {

KVCache::KVCache(const ModelConfig& c, int64_t budget_positions)
    : n_layers_(c.n_layers), kv_lora_rank_(c.kv_lora_rank), rope_dim_(c.qk_rope_head_dim) {
  check(budget_positions >= 0, "KV cache budget must be >= 0 positions, got ", budget_positions);
  budget_ = blocks_of(budget_positions);  // a budget of n positions always holds a sequence of n
}

KVCache::KVCache(const ModelConfig& c, int batch, int capacity)
    : KVCache(c, static_cast<int64_t>(batch) * blocks_of(capacity)) {
  for (int b = 0; b < batch; ++b) create(capacity);
}

bool KVCache::can_reserve(int64_t capacity) const { return capacity >= 0 && blocks_of(capacity) <= free_positions(); }

SeqId KVCache::create(int64_t capacity) {
  check(capacity >= 0, "KV cache: a sequence needs capacity >= 0, got ", capacity);
  const int64_t reserve = blocks_of(capacity);
  check(reserve <= free_positions(), "KV cache full: a sequence of ", capacity, " positions does not fit (",
        free_positions(), " of ", budget_, " positions free; --kv-cache-tokens sets the budget)");
  Sequence s;
  s.capacity = capacity;
  s.reserved = reserve;
  s.layers.resize(static_cast<size_t>(n_layers_));
  // zero-filled so that nothing ever reads an uninitialised float (attention reads whole blocks)
  for (auto& layer : s.layers) layer.reset(new float[static_cast<size_t>(std::max<int64_t>(reserve, 1) * entry_dim())]());
  reserved_ += reserve;
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(s));
  return id;
}

SeqId KVCache::fork(SeqId source, int64_t length, int64_t capacity) {
  check(length >= 0 && length <= get(source).length, "KV cache fork: ", length, " positions of a sequence holding ",
        get(source).length);
  check(capacity >= length, "KV cache fork: capacity ", capacity, " below the shared length ", length);
  const SeqId id = create(capacity);
  Sequence& dst = get(id);
  const Sequence& src = get(source);
  for (int l = 0; l < n_layers_; ++l)
    std::memcpy(dst.layers[l].get(), src.layers[l].get(), sizeof(float) * length * entry_dim());
  dst.length = length;
  return id;
}

bool KVCache::grow(SeqId seq, int64_t capacity) {
  Sequence& s = get(seq);
  if (capacity <= s.capacity) return true;
  const int64_t reserve = blocks_of(capacity);
  if (reserve > s.reserved) {
    if (reserve - s.reserved > free_positions()) return false;
    for (auto& layer : s.layers) {
      std::unique_ptr<float[]> bigger(new float[static_cast<size_t>(reserve * entry_dim())]());
      std::memcpy(bigger.get(), layer.get(), sizeof(float) * s.length * entry_dim());
      layer = std::move(bigger);
    }
    reserved_ += reserve - s.reserved;
    s.reserved = reserve;
  }
  s.capacity = capacity;
  return true;
}

void KVCache::release(SeqId seq) {
  reserved_ -= get(seq).reserved;
  seqs_.erase(seq);
}

void KVCache::set_length(SeqId seq, int64_t length) {
  Sequence& s = get(seq);
  check(length >= 0 && length <= s.capacity, "KV cache: position ", length, " is past the sequence's capacity ",
        s.capacity);
  s.length = length;
}

void KVCache::truncate(SeqId seq, int64_t length) {
  Sequence& s = get(seq);
  check(length >= 0 && length <= s.length, "KV cache truncate: ", length, " of ", s.length, " positions");
  s.length = length;
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

int64_t default_kv_budget(const ModelConfig& c, double fraction) {
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
  const int64_t per_position = static_cast<int64_t>(c.n_layers) * (c.kv_lora_rank + c.qk_rope_head_dim) * 4;
  const int64_t fits = static_cast<int64_t>(static_cast<double>(available_kb) * 1024.0 * fraction) / std::max<int64_t>(per_position, 1);
  return std::clamp<int64_t>(fits, c.max_seq_len, int64_t{1} << 24);
}

}  // namespace dsinfer
