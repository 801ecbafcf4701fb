#include "model/kv_cache.h"

namespace dsinfer {

KVCache::KVCache(const ModelConfig& c, int batch, int capacity)
    : batch_(batch), capacity_(capacity), kv_lora_rank_(c.kv_lora_rank), rope_dim_(c.qk_rope_head_dim) {
  const int64_t slots = static_cast<int64_t>(batch) * capacity;
  entries_.assign(c.n_layers, std::vector<float>(slots * entry_dim()));
}

int64_t KVCache::bytes() const {
  int64_t n = 0;
  for (const auto& layer : entries_) n += static_cast<int64_t>(layer.size() * sizeof(float));
  return n;
}

}  // namespace dsinfer
