// Rotary position embedding with YaRN frequency correction, as the reference's
// precompute_freqs_cis / apply_rotary_emb (docs/REFERENCE.md section 4). Rotates interleaved pairs
// (x[2i], x[2i+1]) as complex numbers. The correction depends on max_seq_len, not the prompt.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace dsinfer {

// The qk_rope_head_dim/2 rotation frequencies, computed in fp32 as the reference does.
std::vector<float> rope_frequencies(const ModelConfig& config);

// The softmax scale of MLA: qk_head_dim^-0.5, times mscale^2 when YaRN is active.
float attention_softmax_scale(const ModelConfig& config);

class Rope {
 public:
  explicit Rope(const ModelConfig& config);
  // Fills the cos/sin table for positions [start_pos, start_pos + n_positions).
  void prepare(int64_t start_pos, int64_t n_positions);
  // Fills it for one absolute position per row (a ragged step's rows).
  void prepare(const std::vector<int64_t>& positions);
  // Rotates x[rope_dim] in place by the angle of the prepared row `index`.
  void apply(float* x, int64_t index) const;
  int64_t half_dim() const { return static_cast<int64_t>(freqs_.size()); }

 private:
  std::vector<float> freqs_;
  std::vector<float> cos_;  // [n_positions, half_dim]
  std::vector<float> sin_;
};

}  // namespace dsinfer
