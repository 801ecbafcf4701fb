#include "model/shard_plan.h"

#include "core/error.h"

namespace dsinfer {

ShardPlan ShardPlan::make(const ModelConfig& c, int rank, int world_size) {
  check(world_size >= 1 && rank >= 0 && rank < world_size, "bad rank ", rank, " of world size ",
        world_size);
  auto divisible = [&](int64_t value, const char* what) {
    check(value % world_size == 0, what, " (", value, ") is not divisible by the world size ",
          world_size);
    return static_cast<int>(value / world_size);
  };
  ShardPlan p;
  p.rank = rank;
  p.world_size = world_size;
  p.vocab_local = divisible(c.vocab_size, "vocab_size");
  p.vocab_begin = rank * p.vocab_local;
  p.n_local_heads = divisible(c.n_heads, "n_heads");
  if (c.n_dense_layers > 0) p.inter_local = divisible(c.inter_dim, "inter_dim");
  if (c.n_dense_layers < c.n_layers) {
    p.shared_inter_local = divisible(static_cast<int64_t>(c.n_shared_experts) * c.moe_inter_dim,
                                     "n_shared_experts * moe_inter_dim");
    p.n_local_experts = divisible(c.n_routed_experts, "n_routed_experts");
    p.experts_begin = rank * p.n_local_experts;
  }
  return p;
}

}  // namespace dsinfer
