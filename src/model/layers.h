// The blocks of the forward pass (internal to the model layer; transformer.cpp strings them
// together). Each takes its input activations and writes its output; collectives happen inside
// where the reference puts them (after wo, after w2, after the routed experts).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_config.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/shard_plan.h"
#include "model/step.h"
#include "model/weights.h"
#include "parallel/comm.h"

namespace dsinfer {

// Grow-only buffers so that decode allocates nothing after the first step.
struct Scratch {
  std::vector<float> q, q_lora, kv, attn, mlp_a, mlp_b, gathered, expert_out, routed, shared,
      scores, query_rows, query_attn;
  std::vector<int> experts;
  std::vector<float> expert_weights;
  std::vector<int64_t> expert_tokens;  // one expert's tokens and their weights (moe_forward)
  std::vector<float> expert_token_weights;
};

// What every block of one forward pass shares.
struct ForwardContext {
  const ModelConfig& config;
  const ShardPlan& plan;
  Comm& comm;
  ThreadPool& pool;
  const KernelConfig& kernels;  // how every product runs
  const Rope& rope;             // prepared with each row's absolute position
  Scratch& scratch;
};

// One layer of a KV cache: where a block's attention writes and reads its sequences' entries.
struct CacheLayer {
  KVCache& cache;
  int layer;
};

inline float* grow(std::vector<float>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(n);
  return v.data();
}

// Multi-head latent attention, absorbed form. x [n, dim] (the step's rows) -> out [n, dim]
// (all-reduced). Writes each chunk's latents and rope keys into its sequence's entries of
// `kv_cache` at its positions.
void mla_forward(const ForwardContext& ctx, const AttentionWeights& w, CacheLayer kv_cache,
                 const Step& step, const float* x, float* out);

// w2(silu(w1 x) * w3 x); x [n, dim] -> out [n, dim]. All-reduced when `reduce`.
void mlp_forward(const ForwardContext& ctx, const MlpWeights& w, const float* x, int64_t n,
                 bool reduce, float* out);

// Router: scores [n_routed_experts] (logits of the gate) -> the chosen experts and their
// weights (docs/REFERENCE.md section 4: softmax or sigmoid, bias only in selection, group limit,
// normalisation for sigmoid, route_scale). experts/weights hold n_activated_experts each.
void route(const ModelConfig& config, const float* gate_logits, const float* bias, int* experts,
           float* weights);

// Mixture of experts: routed experts of this rank (all-reduced) plus the shared experts.
// Returns every row's chosen experts [n, n_activated_experts] (in scratch: valid until its next
// use).
const int* moe_forward(const ForwardContext& ctx, const MoeWeights& w, const float* x, int64_t n,
                       float* out);

}  // namespace dsinfer
