// The weights of one rank, as views into its mapped shard file. Every field's comment gives
// its local shape (H = n_local_heads, I = inter_local, ...). Norm vectors are widened to fp32
// at load (tiny); matrices stay in the file's dtype.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/weight_matrix.h"
#include "model/quantization.h"
#include "model/config.h"
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
  WeightMatrix gate;              // [n_routed_experts, dim]
  std::vector<float> gate_bias;   // [n_routed_experts] or empty (selection-only bias, V3)
  std::vector<MlpWeights> experts;  // this rank's n_local_experts, [moe_inter_dim, dim] etc.
  MlpWeights shared;              // [shared_inter_local, dim]; empty when n_shared_experts == 0
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> ffn_norm;   // [dim]
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights mlp;  // dense layers
  MoeWeights moe;  // MoE layers
};

struct ModelWeights {
  std::shared_ptr<SafetensorsFile> file;  // keeps the mapping alive
  WeightMatrix embed;                     // [vocab_local, dim]
  std::vector<LayerWeights> layers;
  std::vector<float> norm;                // [dim]
  WeightMatrix head;                      // [vocab_local, dim]
  Quantization quantization;              // what the shard's metadata says (convert --experts-int4 / --int8)
};

// The multi-token-prediction module (MTP.md section 1) of one rank, from mtp{rank}-mp{P}.safetensors.
struct MtpWeights {
  std::shared_ptr<SafetensorsFile> file;
  std::vector<float> enorm, hnorm;  // [dim] norms of the next token's embedding and of the hidden state
  WeightMatrix eh_proj;             // [dim, 2 dim], whole on every rank; input [enorm(e) | hnorm(h)]
  LayerWeights block;               // one MLA + MoE block, split across ranks like a main layer
  std::vector<float> head_norm;     // [dim] shared_head.norm
  WeightMatrix embed, head;         // [vocab_local, dim] own copies; empty: the main model's (equal)
};

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
