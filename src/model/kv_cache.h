// The absorbed MLA cache: per layer, per sequence and position, the normalised latent
// (kv_lora_rank floats) and the rotated shared key part (qk_rope_head_dim floats); never full
// per-head keys and values. Sized for the batch and length one generate() call needs.
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
  // [kv_lora_rank] of sequence b at position pos in layer `layer`.
  float* latent(int layer, int b, int pos) {
    return latent_[layer].data() + (static_cast<int64_t>(b) * capacity_ + pos) * kv_lora_rank_;
  }
  // [qk_rope_head_dim]
  float* rope_key(int layer, int b, int pos) {
    return rope_[layer].data() + (static_cast<int64_t>(b) * capacity_ + pos) * rope_dim_;
  }
  int64_t bytes() const;

 private:
  int batch_ = 0;
  int capacity_ = 0;
  int kv_lora_rank_ = 0;
  int rope_dim_ = 0;
  std::vector<std::vector<float>> latent_;  // per layer [batch, capacity, kv_lora_rank]
  std::vector<std::vector<float>> rope_;    // per layer [batch, capacity, qk_rope_head_dim]
};

}  // namespace dsinfer
