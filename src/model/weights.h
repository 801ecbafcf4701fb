// The weights of one rank, as views into its mapped shard file. Every field's comment gives
// its local shape (H = n_local_heads, I = inter_local, ...). Norm vectors are widened to fp32
// at load (tiny); matrices stay in the file's dtype.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "kernels/int8_matrix.h"
#include "kernels/weight_matrix.h"
#include "model/config.h"
#include "model/quantization.h"
#include "model/shard_plan.h"

namespace dsinfer {

struct AttentionWeights {
  WeightMatrix wq;             // [H * qk_head_dim, dim]        (q_lora_rank == 0)
  WeightMatrix wq_a;           // [q_lora_rank, dim]            (q_lora_rank > 0)
  std::vector<float> q_norm;   // [q_lora_rank]
  WeightMatrix wq_b;           // [H * qk_head_dim, q_lora_rank]
  WeightMatrix wkv_a;          // [kv_lora_rank + qk_rope_head_dim, dim]
  std::vector<float> kv_norm;  // [kv_lora_rank]
  WeightMatrix wkv_b;          // [H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  WeightMatrix wo;             // [dim, H * v_head_dim]
};

struct MlpWeights {
  WeightMatrix w1;  // [I, dim]   gate
  WeightMatrix w2;  // [dim, I]   down
  WeightMatrix w3;  // [I, dim]   up
};

struct MoeWeights {
  WeightMatrix gate;                // [n_routed_experts, dim]
  std::vector<float> gate_bias;     // [n_routed_experts] or empty (selection-only bias, V3)
  std::vector<MlpWeights> experts;  // this rank's n_local_experts, [moe_inter_dim, dim] etc.
  MlpWeights shared;                // [shared_inter_local, dim]; empty when n_shared_experts == 0
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> ffn_norm;   // [dim]
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights mlp;  // dense layers
  MoeWeights moe;  // MoE layers
};

// int8 mode's forms of the matrices (model/int8_weights.h), owned beside the views that point
// at them.
using Int8Forms = std::vector<std::unique_ptr<Int8Matrix>>;

struct ModelWeights {
  std::shared_ptr<SafetensorsFile> file;  // keeps the mapping alive
  WeightMatrix embed;                     // [vocab_local, dim]
  std::vector<LayerWeights> layers;
  std::vector<float> norm;    // [dim]
  WeightMatrix head;          // [vocab_local, dim]
  Quantization quantization;  // what the shard's metadata says (convert --experts-int4 / --int8)
  Int8Forms int8_forms;       // int8 mode only
};

// The multi-token-prediction module (docs/MTP.md section 1) of one rank, from
// mtp{rank}-mp{P}.safetensors.
struct MtpWeights {
  std::shared_ptr<SafetensorsFile> file;
  std::vector<float> enorm,
      hnorm;             // [dim] norms of the next token's embedding and of the hidden state
  WeightMatrix eh_proj;  // [dim, 2 dim], whole on every rank; input [enorm(e) | hnorm(h)]
  LayerWeights block;    // one MLA + MoE block, split across ranks like a main layer
  std::vector<float> head_norm;  // [dim] shared_head.norm
  WeightMatrix embed, head;      // [vocab_local, dim] own copies; empty: the main model's (equal)
  Int8Forms int8_forms;          // int8 mode only
};

// fn(name, matrix) for attention's matrices ("attn.wq", "attn.wq_a", ... "attn.wo"), skipping
// those the config leaves out (wq beside wq_a).
template <class Fn>
void for_each_attention_matrix(const AttentionWeights& a, Fn&& fn) {
  const std::pair<const char*, const WeightMatrix*> matrices[] = {
      {"attn.wq", &a.wq},       {"attn.wq_a", &a.wq_a},   {"attn.wq_b", &a.wq_b},
      {"attn.wkv_a", &a.wkv_a}, {"attn.wkv_b", &a.wkv_b}, {"attn.wo", &a.wo}};
  for (const auto& [name, m] : matrices)
    if (!m->empty()) fn(std::string(name), *m);
}

// fn(prefix + ".w1" / ".w2" / ".w3", matrix) for an MLP's matrices (none for an absent one).
template <class Fn>
void for_each_mlp_matrix(const std::string& prefix, const MlpWeights& w, Fn&& fn) {
  for (const auto& [name, m] :
       {std::pair{".w1", &w.w1}, std::pair{".w2", &w.w2}, std::pair{".w3", &w.w3}})
    if (!m->empty()) fn(prefix + name, *m);
}

// Bytes of an MLP's matrices (0 for an absent one): what one pass over it reads.
inline int64_t mlp_bytes(const MlpWeights& w) {
  int64_t bytes = 0;
  for_each_mlp_matrix("", w,
                      [&](const std::string&, const WeightMatrix& m) { bytes += m.bytes(); });
  return bytes;
}

// fn(name, matrix) for each matrix of a layer: attention's, then the dense MLP's ("mlp.w1"), or
// the MoE's router ("moe.gate"), shared expert ("moe.shared.w2") and every local expert
// ("moe.experts.E.w3", E the local index).
template <class Fn>
void for_each_matrix(const LayerWeights& lw, Fn&& fn) {
  for_each_attention_matrix(lw.attn, fn);
  if (!lw.is_moe) return for_each_mlp_matrix("mlp", lw.mlp, fn);
  fn(std::string("moe.gate"), lw.moe.gate);
  for_each_mlp_matrix("moe.shared", lw.moe.shared, fn);
  for (size_t e = 0; e < lw.moe.experts.size(); ++e)
    for_each_mlp_matrix("moe.experts." + std::to_string(e), lw.moe.experts[e], fn);
}

// Binds every tensor the config implies to the shard, checking dtype and shape; a missing
// tensor, a shape that disagrees with the config, or a tensor the config does not explain is
// an Error naming the tensor and the file.
ModelWeights load_weights(const ModelConfig& config, const ShardPlan& plan,
                          std::shared_ptr<SafetensorsFile> file);

MtpWeights load_mtp_weights(const ModelConfig& config, const ShardPlan& plan,
                            std::shared_ptr<SafetensorsFile> file);
// "<dir>/mtp{rank}-mp{world_size}.safetensors"; an Error saying how to make it when missing.
std::string mtp_shard_path(const std::string& ckpt_dir, int rank, int world_size);

// "<dir>/model{rank}-mp{world_size}.safetensors"; a missing shard is an Error that lists the
// shard sets the directory does hold.
std::string shard_path(const std::string& ckpt_dir, int rank, int world_size);

}  // namespace dsinfer
