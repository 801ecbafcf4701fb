// THE name table: Hugging Face tensor names <-> dsinfer (reference) shard names and how each
// is split across tensor-parallel ranks. convert, the loader and the tests all read it, as the
// reference's convert.py `mapping` and model.py's Column/RowParallelLinear do.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsinfer {

// How a tensor is cut across ranks: kRows = along dim 0 (column-parallel linears, embedding,
// head), kCols = along dim 1 (row-parallel linears), kNone = copied to every rank.
// Routed experts are never cut: expert j goes whole to rank j / (n_experts / world_size).
enum class ShardDim { kNone, kRows, kCols, kCount };

struct NameRule {
  std::string_view hf_key;  // second-to-last part of the HF name (after the renames below)
  std::string_view key;     // ours
  ShardDim shard;
};

// The reference mapping, in its order.
extern const NameRule kNameRules[18];

struct ConvertedName {
  std::string name;  // e.g. "layers.3.ffn.experts.17.w1.weight"
  ShardDim shard;    // for routed experts: kNone (whole tensor, one rank)
  int expert = -1;   // routed expert index, or -1
  int layer = -1;    // layer index, or -1 for embed/norm/head
};

// HF name -> shard name exactly as convert.py derives it (strip "model.", self_attn->attn,
// mlp->ffn, weight_scale_inv->scale, e_score_correction_bias->bias, then the key map).
// Throws Error for a key the table lacks.
ConvertedName convert_hf_name(const std::string& hf_name);

// The multi-token-prediction module (HF layer num_hidden_layers, `mtp_layer`) as it is kept in
// mtp{rank}-mp{P}.safetensors: "mtp." + what the name would be in a main layer
// ("mtp.attn.wq_a.weight", "mtp.ffn.experts.3.w1.weight", split the same way), plus its own parts:
// "mtp.enorm.weight", "mtp.hnorm.weight", "mtp.eh_proj.weight" (copied to every rank: [dim, 2 dim],
// the embedding half first), "mtp.head_norm.weight" (shared_head.norm), and its copies of the
// embedding and the head, "mtp.embed.weight" and "mtp.head.weight" (split as the main ones; convert
// stores them only where they differ from the main tensors).
ConvertedName convert_mtp_name(const std::string& hf_name, int mtp_layer);
// The HF name of the main tensor an MTP copy duplicates ("model.embed_tokens.weight" for
// "mtp.embed.weight", "lm_head.weight" for "mtp.head.weight"), else "".
std::string mtp_copy_of(const std::string& mtp_name);

// Shard dim of one of our tensor names (a `.scale` follows its weight).
ShardDim shard_dim_of(const std::string& name);

// Layer index of "model.layers.{i}...." / "layers.{i}....", or -1.
int layer_of(std::string_view name);

}  // namespace dsinfer
