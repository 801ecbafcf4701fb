#include "model/tensor_names.h"

#include <charconv>
#include <vector>

#include "core/error.h"

namespace dsinfer {

const NameRule kNameRules[18] = {
    {"embed_tokens", "embed", ShardDim::kRows},
    {"input_layernorm", "attn_norm", ShardDim::kNone},
    {"post_attention_layernorm", "ffn_norm", ShardDim::kNone},
    {"q_proj", "wq", ShardDim::kRows},
    {"q_a_proj", "wq_a", ShardDim::kNone},
    {"q_a_layernorm", "q_norm", ShardDim::kNone},
    {"q_b_proj", "wq_b", ShardDim::kRows},
    {"kv_a_proj_with_mqa", "wkv_a", ShardDim::kNone},
    {"kv_a_layernorm", "kv_norm", ShardDim::kNone},
    {"kv_b_proj", "wkv_b", ShardDim::kRows},
    {"o_proj", "wo", ShardDim::kCols},
    {"gate", "gate", ShardDim::kNone},
    {"gate_proj", "w1", ShardDim::kRows},
    {"down_proj", "w2", ShardDim::kCols},
    {"up_proj", "w3", ShardDim::kRows},
    {"norm", "norm", ShardDim::kNone},
    {"lm_head", "head", ShardDim::kRows},
    {"scale", "scale", ShardDim::kNone},
};

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = s.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(s.substr(start, dot - start));
  parts.push_back(s.substr(start));
  return parts;
}

int parse_int(const std::string& s) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return (ec == std::errc() && ptr == s.data() + s.size()) ? v : -1;
}

}  // namespace

int layer_of(std::string_view name) {
  std::string s(name);
  if (s.rfind("model.", 0) == 0) s = s.substr(6);
  if (s.rfind("layers.", 0) != 0) return -1;
  auto parts = split_dots(s);
  return parts.size() > 1 ? parse_int(parts[1]) : -1;
}

ConvertedName convert_hf_name(const std::string& hf_name) {
  std::string name = hf_name;
  if (name.rfind("model.", 0) == 0) name = name.substr(6);
  replace_all(name, "self_attn", "attn");
  replace_all(name, "mlp", "ffn");
  replace_all(name, "weight_scale_inv", "scale");
  replace_all(name, "e_score_correction_bias", "bias");
  auto parts = split_dots(name);
  check(parts.size() >= 2, "tensor name ", hf_name, " has no module part");
  const std::string key = parts[parts.size() - 2];
  const NameRule* rule = nullptr;
  for (const NameRule& r : kNameRules)
    if (r.hf_key == key) rule = &r;
  check(rule != nullptr, "tensor ", hf_name, ": key \"", key, "\" is not in the name table");
  // convert.py uses str.replace, which renames every occurrence of the key in the name.
  replace_all(name, rule->hf_key, rule->key);
  ConvertedName out{name, rule->shard};
  out.layer = layer_of(name);
  // "experts" but not "shared_experts": a routed expert, which goes whole to one rank.
  if (name.find("experts") != std::string::npos &&
      name.find("shared_experts") == std::string::npos) {
    check(parts.size() >= 3, "tensor ", hf_name, ": expert index missing");
    out.expert = parse_int(split_dots(name)[split_dots(name).size() - 3]);
    check(out.expert >= 0, "tensor ", hf_name, ": bad expert index");
    out.shard = ShardDim::kNone;
  }
  return out;
}

ConvertedName convert_mtp_name(const std::string& hf_name, int mtp_layer) {
  const std::string prefix = "model.layers." + std::to_string(mtp_layer) + ".";
  check(hf_name.rfind(prefix, 0) == 0, "tensor ", hf_name, " is not part of the MTP layer ",
        mtp_layer);
  const std::string rest = hf_name.substr(prefix.size());
  static const struct {
    std::string_view hf, ours;
    ShardDim shard;
  } own[] = {
      {"enorm.weight", "mtp.enorm.weight", ShardDim::kNone},
      {"hnorm.weight", "mtp.hnorm.weight", ShardDim::kNone},
      {"eh_proj.weight", "mtp.eh_proj.weight", ShardDim::kNone},
      {"shared_head.norm.weight", "mtp.head_norm.weight", ShardDim::kNone},
      {"shared_head.head.weight", "mtp.head.weight", ShardDim::kRows},
      {"embed_tokens.weight", "mtp.embed.weight", ShardDim::kRows},
  };
  for (const auto& o : own)
    if (rest == o.hf) return ConvertedName{std::string(o.ours), o.shard, -1, mtp_layer};
  ConvertedName block = convert_hf_name(hf_name);
  const std::string main_prefix = "layers." + std::to_string(mtp_layer) + ".";
  check(block.name.rfind(main_prefix, 0) == 0, "tensor ", hf_name, " converts to ", block.name,
        ", outside the MTP layer");
  block.name = "mtp." + block.name.substr(main_prefix.size());
  return block;
}

std::string mtp_copy_of(const std::string& mtp_name) {
  if (mtp_name == "mtp.embed.weight") return "model.embed_tokens.weight";
  if (mtp_name == "mtp.head.weight") return "lm_head.weight";
  return "";
}

ShardDim shard_dim_of(const std::string& name) {
  auto parts = split_dots(name);
  if (parts.size() < 2) return ShardDim::kNone;
  if (name.find("experts") != std::string::npos && name.find("shared_experts") == std::string::npos)
    return ShardDim::kNone;
  const std::string& key = parts[parts.size() - 2];
  for (const NameRule& r : kNameRules)
    if (r.key == key) return r.shard;
  return ShardDim::kNone;
}

}  // namespace dsinfer
