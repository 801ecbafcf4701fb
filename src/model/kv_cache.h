// The absorbed MLA cache: per layer, per sequence and position, the normalised latent
// (kv_lora_rank floats) followed by the rotated shared key part (qk_rope_head_dim floats); never
// full per-head keys and values. The two halves of an entry sit side by side so that a
// sequence's entries are one matrix [positions, kv_lora_rank + qk_rope_head_dim], and attention
// scores are one product with queries laid out the same way ([q_abs | q_pe]). Sized for the
// batch and length one generate() call needs.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace dsinfer {

class KVCache {
 public:
  KVCache() = default;
  KVCache(const ModelConfig& config, int batch, int capacity);

  int batch() const { return batch_; }
  int capacity() const { return capacity_; }
  // Floats per entry: kv_lora_rank + qk_rope_head_dim (the row stride of entries).
  int64_t entry_dim() const { return kv_lora_rank_ + rope_dim_; }
  // [entry_dim] of sequence b at position pos in layer `layer`: the latent, then the rope key;
  // the entries of one sequence follow each other.
  float* entry(int layer, int b, int pos) {
    return entries_[layer].data() + (static_cast<int64_t>(b) * capacity_ + pos) * entry_dim();
  }
  // [kv_lora_rank], the first part of an entry
  float* latent(int layer, int b, int pos) { return entry(layer, b, pos); }
  // [qk_rope_head_dim], the second part
  float* rope_key(int layer, int b, int pos) { return entry(layer, b, pos) + kv_lora_rank_; }
  int64_t bytes() const;

 private:
  int batch_ = 0;
  int capacity_ = 0;
  int kv_lora_rank_ = 0;
  int rope_dim_ = 0;
  std::vector<std::vector<float>> entries_;  // per layer [batch, capacity, kv_lora_rank + qk_rope_head_dim]
};

}  // namespace dsinfer
