#include "model/tensor_names.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::tensor_names_test {
namespace {

using json = nlohmann::json;
using test::data_path;
using test::read_file;

using test::error_of;

json load_json(const std::string& relative) { return json::parse(read_file(data_path(relative))); }

// The HF names of the tiny-v3 checkpoint, minus the MTP layer (layer 3 = num_hidden_layers),
// which convert.py drops.
std::vector<std::string> tiny_v3_hf_names() {
  std::vector<std::string> names;
  const json map = load_json("golden/tiny-v3/hf/model.safetensors.index.json")["weight_map"];
  for (auto it = map.begin(); it != map.end(); ++it)
    if (it.key().rfind("model.layers.3.", 0) != 0) names.push_back(it.key());
  return names;
}

// name -> shape of the tensors one convert.py output file holds, from a golden manifest.
std::map<std::string, std::vector<int64_t>> manifest_shapes(const std::string& relative,
                                                            const std::string& file) {
  std::map<std::string, std::vector<int64_t>> out;
  const json m = load_json(relative).at(file);
  for (auto it = m.begin(); it != m.end(); ++it)
    out[it.key()] = it.value().at("shape").get<std::vector<int64_t>>();
  return out;
}

TEST(TensorNames, ConvertsEveryTinyV3NameToTheReferenceConverterName) {
  const auto names = tiny_v3_hf_names();
  ASSERT_GT(names.size(), 150u);
  const auto expected =
      manifest_shapes("golden/tiny-v3/convert-mp1.manifest.json", "model0-mp1.safetensors");
  std::set<std::string> converted;
  for (const auto& hf : names) {
    const ConvertedName c = convert_hf_name(hf);
    EXPECT_TRUE(expected.count(c.name)) << hf << " -> " << c.name;
    EXPECT_TRUE(converted.insert(c.name).second) << "two HF names give " << c.name;
  }
  std::set<std::string> want;
  for (const auto& [name, shape] : expected) want.insert(name);
  EXPECT_EQ(converted, want);
  // A few by hand, including scales and the router bias.
  EXPECT_EQ(convert_hf_name("model.embed_tokens.weight").name, "embed.weight");
  EXPECT_EQ(convert_hf_name("lm_head.weight").name, "head.weight");
  EXPECT_EQ(convert_hf_name("model.norm.weight").name, "norm.weight");
  EXPECT_EQ(convert_hf_name("model.layers.0.input_layernorm.weight").name,
            "layers.0.attn_norm.weight");
  EXPECT_EQ(convert_hf_name("model.layers.0.post_attention_layernorm.weight").name,
            "layers.0.ffn_norm.weight");
  EXPECT_EQ(convert_hf_name("model.layers.0.self_attn.q_b_proj.weight_scale_inv").name,
            "layers.0.attn.wq_b.scale");
  EXPECT_EQ(convert_hf_name("model.layers.0.self_attn.kv_a_proj_with_mqa.weight").name,
            "layers.0.attn.wkv_a.weight");
  EXPECT_EQ(convert_hf_name("model.layers.0.self_attn.kv_a_layernorm.weight").name,
            "layers.0.attn.kv_norm.weight");
  EXPECT_EQ(convert_hf_name("model.layers.0.self_attn.q_a_layernorm.weight").name,
            "layers.0.attn.q_norm.weight");
  EXPECT_EQ(convert_hf_name("model.layers.2.mlp.gate.e_score_correction_bias").name,
            "layers.2.ffn.gate.bias");
  EXPECT_EQ(convert_hf_name("model.layers.2.mlp.gate.weight").name, "layers.2.ffn.gate.weight");
  EXPECT_EQ(convert_hf_name("model.layers.2.mlp.experts.7.down_proj.weight_scale_inv").name,
            "layers.2.ffn.experts.7.w2.scale");
  EXPECT_EQ(convert_hf_name("model.layers.2.mlp.shared_experts.up_proj.weight").name,
            "layers.2.ffn.shared_experts.w3.weight");
  EXPECT_EQ(convert_hf_name("model.layers.60.self_attn.q_proj.weight").name,
            "layers.60.attn.wq.weight");
}

TEST(TensorNames, V2NamesWithoutLowRankQ) {
  // V2-Lite has q_proj (no q_lora) and no fp8 scales: its golden manifest names must match too.
  const json map = load_json("golden/tiny-v2-lite/hf/model.safetensors.index.json")["weight_map"];
  const auto expected =
      manifest_shapes("golden/tiny-v2-lite/convert-mp1.manifest.json", "model0-mp1.safetensors");
  std::set<std::string> converted;
  for (auto it = map.begin(); it != map.end(); ++it)
    converted.insert(convert_hf_name(it.key()).name);
  std::set<std::string> want;
  for (const auto& [name, shape] : expected) want.insert(name);
  EXPECT_EQ(converted, want);
  EXPECT_TRUE(want.count("layers.0.attn.wq.weight"));
}

// Which dim the reference cut, read off the mp1 and mp2 manifests: the one that halved.
ShardDim observed_shard(const std::vector<int64_t>& whole, const std::vector<int64_t>& half) {
  EXPECT_EQ(whole.size(), half.size());
  for (size_t d = 0; d < whole.size() && d < half.size(); ++d)
    if (whole[d] != half[d]) {
      EXPECT_EQ(whole[d], 2 * half[d]);
      return d == 0 ? ShardDim::kRows : ShardDim::kCols;
    }
  return ShardDim::kNone;
}

TEST(TensorNames, ShardDimsMatchTheReferenceConverter) {
  const auto mp1 =
      manifest_shapes("golden/tiny-v3/convert-mp1.manifest.json", "model0-mp1.safetensors");
  const auto mp2 =
      manifest_shapes("golden/tiny-v3/convert-mp2.manifest.json", "model0-mp2.safetensors");
  int compared = 0;
  for (const auto& hf : tiny_v3_hf_names()) {
    const ConvertedName c = convert_hf_name(hf);
    EXPECT_EQ(shard_dim_of(c.name), c.shard) << c.name;
    if (c.expert >= 0) {
      // Routed experts go whole to one rank: 8 experts over 2 ranks, rank 0 holds 0..3.
      EXPECT_EQ(c.shard, ShardDim::kNone) << c.name;
      EXPECT_EQ(mp2.count(c.name) > 0, c.expert < 4) << c.name;
      if (mp2.count(c.name)) {
        EXPECT_EQ(mp2.at(c.name), mp1.at(c.name)) << c.name;
      }
      continue;
    }
    ASSERT_TRUE(mp2.count(c.name)) << c.name;
    EXPECT_EQ(c.shard, observed_shard(mp1.at(c.name), mp2.at(c.name))) << c.name;
    ++compared;
  }
  EXPECT_GT(compared, 40);
}

TEST(TensorNames, ShardDimsByHand) {
  auto shard = [](const std::string& hf) { return convert_hf_name(hf).shard; };
  EXPECT_EQ(shard("model.layers.0.self_attn.q_b_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.self_attn.q_b_proj.weight_scale_inv"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.self_attn.q_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.self_attn.kv_b_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.self_attn.o_proj.weight"), ShardDim::kCols);
  EXPECT_EQ(shard("model.layers.0.self_attn.o_proj.weight_scale_inv"), ShardDim::kCols);
  EXPECT_EQ(shard("model.layers.0.self_attn.q_a_proj.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.0.mlp.gate_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.mlp.up_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.0.mlp.down_proj.weight"), ShardDim::kCols);
  EXPECT_EQ(shard("model.layers.1.mlp.shared_experts.gate_proj.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.1.mlp.shared_experts.up_proj.weight_scale_inv"), ShardDim::kRows);
  EXPECT_EQ(shard("model.layers.1.mlp.shared_experts.down_proj.weight"), ShardDim::kCols);
  EXPECT_EQ(shard("model.layers.1.mlp.experts.5.gate_proj.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.1.mlp.experts.5.down_proj.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.1.mlp.gate.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.1.mlp.gate.e_score_correction_bias"), ShardDim::kNone);
  EXPECT_EQ(shard("model.embed_tokens.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("lm_head.weight"), ShardDim::kRows);
  EXPECT_EQ(shard("model.norm.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.0.input_layernorm.weight"), ShardDim::kNone);
  EXPECT_EQ(shard("model.layers.0.self_attn.kv_a_layernorm.weight"), ShardDim::kNone);

  EXPECT_EQ(shard_dim_of("layers.0.attn.wo.scale"), ShardDim::kCols);
  EXPECT_EQ(shard_dim_of("layers.0.attn.wq_b.weight"), ShardDim::kRows);
  EXPECT_EQ(shard_dim_of("layers.1.ffn.experts.3.w1.weight"), ShardDim::kNone);
  EXPECT_EQ(shard_dim_of("layers.1.ffn.shared_experts.w2.weight"), ShardDim::kCols);
  EXPECT_EQ(shard_dim_of("embed.weight"), ShardDim::kRows);
  EXPECT_EQ(shard_dim_of("head.weight"), ShardDim::kRows);
  EXPECT_EQ(shard_dim_of("norm.weight"), ShardDim::kNone);
  EXPECT_EQ(shard_dim_of("weight"), ShardDim::kNone);
}

TEST(TensorNames, ExpertAndLayerIndex) {
  ConvertedName c = convert_hf_name("model.layers.12.mlp.experts.255.up_proj.weight_scale_inv");
  EXPECT_EQ(c.name, "layers.12.ffn.experts.255.w3.scale");
  EXPECT_EQ(c.expert, 255);
  EXPECT_EQ(c.layer, 12);
  EXPECT_EQ(c.shard, ShardDim::kNone);
  c = convert_hf_name("model.layers.1.mlp.experts.0.gate_proj.weight");
  EXPECT_EQ(c.expert, 0);
  EXPECT_EQ(c.layer, 1);
  c = convert_hf_name("model.layers.4.mlp.shared_experts.gate_proj.weight");
  EXPECT_EQ(c.expert, -1);
  EXPECT_EQ(c.layer, 4);
  c = convert_hf_name("model.embed_tokens.weight");
  EXPECT_EQ(c.expert, -1);
  EXPECT_EQ(c.layer, -1);
  EXPECT_EQ(convert_hf_name("lm_head.weight").layer, -1);
  EXPECT_EQ(layer_of("model.layers.7.self_attn.o_proj.weight"), 7);
  EXPECT_EQ(layer_of("layers.61.attn.wo.weight"), 61);
  EXPECT_EQ(layer_of("layers.x.attn"), -1);
  EXPECT_EQ(layer_of("embed.weight"), -1);
  EXPECT_EQ(layer_of("layers"), -1);
  // Every expert name in tiny-v3 carries its index.
  for (const auto& hf : tiny_v3_hf_names()) {
    const ConvertedName cn = convert_hf_name(hf);
    const size_t at = hf.find(".experts.");
    if (at == std::string::npos) {
      EXPECT_EQ(cn.expert, -1) << hf;
      continue;
    }
    EXPECT_EQ(cn.expert, std::stoi(hf.substr(at + 9))) << hf;
  }
}

TEST(TensorNames, UnknownKeyIsAnError) {
  for (const char* bad : {"model.layers.3.enorm.weight", "model.layers.3.eh_proj.weight",
                          "model.layers.0.self_attn.rotary_emb.inv_freq", "weight",
                          "model.layers.0.mlp.foo.weight"}) {
    std::string msg = error_of([&] { convert_hf_name(bad); });
    EXPECT_CONTAINS(msg, bad);
  }
  std::string msg = error_of([&] { convert_hf_name("model.layers.3.enorm.weight"); });
  EXPECT_CONTAINS(msg, "\"enorm\"");
  msg = error_of([&] { convert_hf_name("model.layers.1.mlp.experts.x.gate_proj.weight"); });
  EXPECT_CONTAINS(msg, "expert");
}

TEST(TensorNames, TableIsTheReferenceMapping) {
  std::set<std::string> hf_keys, keys;
  for (const NameRule& r : kNameRules) {
    EXPECT_TRUE(hf_keys.insert(std::string(r.hf_key)).second) << r.hf_key;
    keys.insert(std::string(r.key));
  }
  EXPECT_EQ(hf_keys.size(), 18u);
  EXPECT_EQ(keys.size(), 18u);  // ours are unique too, so shard_dim_of is well defined
}

}  // namespace
}  // namespace dsinfer::tensor_names_test
