// What one tensor-parallel rank owns (docs/REFERENCE.md sections 3-4): a contiguous block of the
// vocabulary, of the heads, of the intermediate dims, and of the routed experts.
#pragma once

#include "model/config.h"

namespace dsinfer {

struct ShardPlan {
  int rank = 0;
  int world_size = 1;

  // Throws Error naming the dimension that world_size does not divide.
  static ShardPlan make(const ModelConfig& config, int rank, int world_size);

  int vocab_local = 0;  // rows of embed and head on this rank
  int vocab_begin = 0;
  int n_local_heads = 0;
  int inter_local = 0;         // dense MLP
  int shared_inter_local = 0;  // shared experts: n_shared_experts * moe_inter_dim / world_size
  int n_local_experts = 0;
  int experts_begin = 0;
};

}  // namespace dsinfer
