// Model hyperparameters: every field of the reference's ModelArgs with its default
// (docs/REFERENCE.md section 2). Read from the reference's configs/*.json form or from a
// Hugging Face config.json, which carries the same facts under other names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsinfer {

enum class ScoreFunc { kSoftmax, kSigmoid, kCount };
enum class WeightDType { kBF16, kFP8, kCount };

struct ModelConfig {
  int max_batch_size = 8;
  int max_seq_len = 4096 * 4;
  WeightDType dtype = WeightDType::kBF16;
  std::string scale_fmt;  // "" (None) or "ue8m0"
  int vocab_size = 102400;
  int dim = 2048;
  int inter_dim = 10944;
  int moe_inter_dim = 1408;
  int n_layers = 27;
  int n_dense_layers = 1;
  int n_heads = 16;
  // moe
  int n_routed_experts = 64;
  int n_shared_experts = 2;
  int n_activated_experts = 6;
  int n_expert_groups = 1;
  int n_limited_groups = 1;
  ScoreFunc score_func = ScoreFunc::kSoftmax;
  double route_scale = 1.0;
  // mla
  int q_lora_rank = 0;
  int kv_lora_rank = 512;
  int qk_nope_head_dim = 128;
  int qk_rope_head_dim = 64;
  int v_head_dim = 128;
  // yarn
  int original_seq_len = 4096;
  double rope_theta = 10000.0;
  double rope_factor = 40;
  int beta_fast = 32;
  int beta_slow = 1;
  double mscale = 1.0;

  // Only in HF config.json (informational; the reference ignores them).
  int eos_token_id = -1;
  int bos_token_id = -1;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int layer) const { return layer >= n_dense_layers; }
  // Throws Error when a value is impossible (non-positive sizes, groups that do not divide, ...).
  void validate() const;
  // The reference prints its ModelArgs at start; this is our equivalent one-liner.
  std::string summary() const;
  // Every field of ModelArgs as (name, value written exactly: doubles to 17 digits), in
  // declaration order; what equality and the ranks' agreement compare (not the informational
  // token ids: an HF config and the reference form of one model are equal).
  using Fields = std::vector<std::pair<std::string, std::string>>;
  Fields fields() const;
  bool operator==(const ModelConfig& other) const { return fields() == other.fields(); }
};

// "name=a against name=b" for every field where two field lists differ (a's first), in order.
std::vector<std::string> config_differences(const ModelConfig::Fields& a,
                                            const ModelConfig::Fields& b);

// Reads either form; the HF form is recognised by "hidden_size". Unknown keys in the
// reference form are an error (as ModelArgs(**json) is in Python). Throws Error naming the file.
ModelConfig load_config(const std::string& path);
ModelConfig parse_config_json(const std::string& text, const std::string& origin);

}  // namespace dsinfer
