#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::config_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;
using test::read_file;
using test::scratch_dir;
using test::write_file;

using test::error_of;

std::string config_path(const std::string& name) { return data_path("../../configs/" + name); }

// Every ModelArgs field, printed exactly (doubles with all their digits).
std::vector<std::pair<std::string, std::string>> model_args_fields(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* name, auto value) {
    std::ostringstream s;
    s.precision(17);
    s << value;
    out.emplace_back(name, s.str());
  };
  add("max_batch_size", c.max_batch_size);
  add("max_seq_len", c.max_seq_len);
  add("dtype", static_cast<int>(c.dtype));
  add("scale_fmt", c.scale_fmt);
  add("vocab_size", c.vocab_size);
  add("dim", c.dim);
  add("inter_dim", c.inter_dim);
  add("moe_inter_dim", c.moe_inter_dim);
  add("n_layers", c.n_layers);
  add("n_dense_layers", c.n_dense_layers);
  add("n_heads", c.n_heads);
  add("n_routed_experts", c.n_routed_experts);
  add("n_shared_experts", c.n_shared_experts);
  add("n_activated_experts", c.n_activated_experts);
  add("n_expert_groups", c.n_expert_groups);
  add("n_limited_groups", c.n_limited_groups);
  add("score_func", static_cast<int>(c.score_func));
  add("route_scale", c.route_scale);
  add("q_lora_rank", c.q_lora_rank);
  add("kv_lora_rank", c.kv_lora_rank);
  add("qk_nope_head_dim", c.qk_nope_head_dim);
  add("qk_rope_head_dim", c.qk_rope_head_dim);
  add("v_head_dim", c.v_head_dim);
  add("original_seq_len", c.original_seq_len);
  add("rope_theta", c.rope_theta);
  add("rope_factor", c.rope_factor);
  add("beta_fast", c.beta_fast);
  add("beta_slow", c.beta_slow);
  add("mscale", c.mscale);
  return out;
}

TEST(Config, DefaultsAreTheReferenceModelArgs) {
  const ModelConfig c;
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_EQ(c.max_seq_len, 16384);
  EXPECT_EQ(c.dtype, WeightDType::kBF16);
  EXPECT_EQ(c.scale_fmt, "");
  EXPECT_EQ(c.vocab_size, 102400);
  EXPECT_EQ(c.dim, 2048);
  EXPECT_EQ(c.inter_dim, 10944);
  EXPECT_EQ(c.moe_inter_dim, 1408);
  EXPECT_EQ(c.n_layers, 27);
  EXPECT_EQ(c.n_dense_layers, 1);
  EXPECT_EQ(c.n_heads, 16);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_shared_experts, 2);
  EXPECT_EQ(c.n_activated_experts, 6);
  EXPECT_EQ(c.n_expert_groups, 1);
  EXPECT_EQ(c.n_limited_groups, 1);
  EXPECT_EQ(c.score_func, ScoreFunc::kSoftmax);
  EXPECT_EQ(c.route_scale, 1.0);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.original_seq_len, 4096);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_factor, 40.0);
  EXPECT_EQ(c.beta_fast, 32);
  EXPECT_EQ(c.beta_slow, 1);
  EXPECT_EQ(c.mscale, 1.0);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_NO_THROW(c.validate());
  // An empty reference-form file is ModelArgs() itself.
  EXPECT_EQ(model_args_fields(parse_config_json("{}", "empty")), model_args_fields(c));
}

TEST(Config, Loads16B) {
  const ModelConfig c = load_config(config_path("config_16B.json"));
  EXPECT_EQ(c.vocab_size, 102400);
  EXPECT_EQ(c.dim, 2048);
  EXPECT_EQ(c.n_layers, 27);
  EXPECT_EQ(c.n_dense_layers, 1);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_activated_experts, 6);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.mscale, 0.707);
  EXPECT_EQ(c.score_func, ScoreFunc::kSoftmax);
  EXPECT_EQ(c.dtype, WeightDType::kBF16);
  EXPECT_EQ(c.n_expert_groups, 1);
  EXPECT_EQ(c.n_limited_groups, 1);
  EXPECT_EQ(c.route_scale, 1.0);
  EXPECT_EQ(c.scale_fmt, "");
  EXPECT_EQ(c.max_seq_len, 16384);
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_EQ(c.rope_factor, 40.0);
  EXPECT_EQ(c.original_seq_len, 4096);
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_FALSE(c.is_moe_layer(0));
}

TEST(Config, Loads236B) {
  const ModelConfig c = load_config(config_path("config_236B.json"));
  EXPECT_EQ(c.dim, 5120);
  EXPECT_EQ(c.n_layers, 60);
  EXPECT_EQ(c.n_heads, 128);
  EXPECT_EQ(c.n_routed_experts, 160);
  EXPECT_EQ(c.n_expert_groups, 8);
  EXPECT_EQ(c.n_limited_groups, 3);
  EXPECT_EQ(c.route_scale, 16.0);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.score_func, ScoreFunc::kSoftmax);
  EXPECT_EQ(c.dtype, WeightDType::kBF16);
  EXPECT_EQ(c.mscale, 1.0);
}

TEST(Config, Loads671B) {
  const ModelConfig c = load_config(config_path("config_671B.json"));
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.dim, 7168);
  EXPECT_EQ(c.inter_dim, 18432);
  EXPECT_EQ(c.moe_inter_dim, 2048);
  EXPECT_EQ(c.n_layers, 61);
  EXPECT_EQ(c.n_dense_layers, 3);
  EXPECT_EQ(c.n_heads, 128);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.n_activated_experts, 8);
  EXPECT_EQ(c.n_expert_groups, 8);
  EXPECT_EQ(c.n_limited_groups, 4);
  EXPECT_EQ(c.route_scale, 2.5);
  EXPECT_EQ(c.score_func, ScoreFunc::kSigmoid);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.dtype, WeightDType::kFP8);
  EXPECT_EQ(c.scale_fmt, "");
  EXPECT_EQ(c.mscale, 1.0);
  EXPECT_EQ(c.max_seq_len, 16384);
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
}

TEST(Config, LoadsV31) {
  const ModelConfig c = load_config(config_path("config_v3.1.json"));
  const ModelConfig v3 = load_config(config_path("config_671B.json"));
  EXPECT_EQ(c.scale_fmt, "ue8m0");
  // Otherwise identical to V3.
  auto a = model_args_fields(c), b = model_args_fields(v3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != "scale_fmt") {
      EXPECT_EQ(a[i], b[i]);
    }
}

TEST(Config, HfFormGivesTheSameModelArgsAsReferenceForm) {
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(data_path("golden"))) {
    const fs::path hf = entry.path() / "hf";
    if (!fs::exists(hf / "config.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const ModelConfig from_hf = load_config((hf / "config.json").string());
    const ModelConfig from_ref = load_config((hf / "inference_config.json").string());
    const auto a = model_args_fields(from_hf), b = model_args_fields(from_ref);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
    // The HF file also carries the special tokens, which the reference form lacks.
    const json j = json::parse(read_file((hf / "config.json").string()));
    EXPECT_EQ(from_hf.eos_token_id, j.at("eos_token_id").get<int>());
    EXPECT_EQ(from_hf.bos_token_id, j.at("bos_token_id").get<int>());
    EXPECT_EQ(from_ref.eos_token_id, -1);
    ++compared;
  }
  EXPECT_GE(compared, 5);
}

TEST(Config, HfFormDetails) {
  // V2-Lite style: q_lora_rank null means no low-rank q; mscale comes from mscale_all_dim.
  const ModelConfig lite = load_config(data_path("golden/tiny-v2-lite/hf/config.json"));
  EXPECT_EQ(lite.q_lora_rank, 0);
  EXPECT_EQ(lite.mscale, 0.707);
  EXPECT_EQ(lite.dtype, WeightDType::kBF16);
  const ModelConfig v3 = load_config(data_path("golden/tiny-v3/hf/config.json"));
  EXPECT_EQ(v3.dtype, WeightDType::kFP8);
  EXPECT_EQ(v3.score_func, ScoreFunc::kSigmoid);
  EXPECT_EQ(v3.n_layers, 3);  // the MTP layer is not a layer of the model

  json j = json::parse(read_file(data_path("golden/tiny-v3/hf/config.json")));
  j["quantization_config"]["scale_fmt"] = "ue8m0";
  EXPECT_EQ(parse_config_json(j.dump(), "v31").scale_fmt, "ue8m0");
  j["rope_scaling"] = {{"factor", 8},
                       {"mscale", 0.5},
                       {"mscale_all_dim", 0.25},
                       {"original_max_position_embeddings", 2048},
                       {"beta_fast", 16},
                       {"beta_slow", 2}};
  const ModelConfig c = parse_config_json(j.dump(), "yarn");
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.mscale, 0.25);
  EXPECT_EQ(c.original_seq_len, 2048);
  EXPECT_EQ(c.beta_fast, 16);
  EXPECT_EQ(c.beta_slow, 2);
  j["rope_theta"] = 50000.0;
  EXPECT_EQ(parse_config_json(j.dump(), "theta").rope_theta, 50000.0);
}

TEST(Config, HfFormErrors) {
  const json base = json::parse(read_file(data_path("golden/tiny-v3/hf/config.json")));
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no vocab_size", [](json& j) { j.erase("vocab_size"); }, "lacks vocab_size"},
      {"null kv_lora_rank", [](json& j) { j["kv_lora_rank"] = nullptr; }, "lacks kv_lora_rank"},
      {"string layers", [](json& j) { j["num_hidden_layers"] = "3"; },
       "num_hidden_layers must be an integer"},
      {"fractional dim", [](json& j) { j["hidden_size"] = 255.5; },
       "hidden_size must be an integer"},
      {"bad scoring_func", [](json& j) { j["scoring_func"] = "relu"; },
       "score_func must be softmax or sigmoid"},
      {"bad quant method", [](json& j) { j["quantization_config"]["quant_method"] = "gptq"; },
       "unsupported quantization method \"gptq\""},
      {"non-string quant method", [](json& j) { j["quantization_config"]["quant_method"] = 8; },
       "quant_method"},
      {"string rope factor", [](json& j) { j["rope_scaling"]["factor"] = "40"; },
       "rope_scaling.factor"},
      {"rope_scaling not an object", [](json& j) { j["rope_scaling"] = 40; }, "rope_scaling"},
      {"groups do not divide", [](json& j) { j["n_group"] = 3; },
       "n_expert_groups must divide n_routed_experts"},
      // values the reference's math rejects (here they were NaN logits and an empty completion)
      {"rope_theta 1", [](json& j) { j["rope_theta"] = 1; },
       "rope_theta must be a finite number > 1, got 1"},
      {"rope_theta 0.5", [](json& j) { j["rope_theta"] = 0.5; }, "rope_theta must be"},
      {"rope factor 0", [](json& j) { j["rope_scaling"]["factor"] = 0; },
       "rope_factor (rope_scaling.factor)"},
      {"rope factor -40", [](json& j) { j["rope_scaling"]["factor"] = -40; }, "rope_factor"},
      {"negative original length",
       [](json& j) { j["rope_scaling"]["original_max_position_embeddings"] = -4096; },
       "original_seq_len (rope_scaling.original_max_position_embeddings) must be positive"},
      {"beta_slow 0", [](json& j) { j["rope_scaling"]["beta_slow"] = 0; },
       "beta_slow must be positive"},
      // finite as doubles, but not as the floats the math uses (NaN logits, exit 0 before)
      {"rope factor 1e-300", [](json& j) { j["rope_scaling"]["factor"] = 1e-300; },
       "rope_factor (rope_scaling.factor) must be a finite number > 0 that a float holds"},
      {"rope factor 1e-46", [](json& j) { j["rope_scaling"]["factor"] = 1e-46; },
       "that a float holds"},
      {"mscale_all_dim 1e200", [](json& j) { j["rope_scaling"]["mscale_all_dim"] = 1e200; },
       "mscale must be a finite number that a float holds"},
      {"mscale_all_dim 1e5", [](json& j) { j["rope_scaling"]["mscale_all_dim"] = 1e5; },
       "which the attention scores cannot take"},
      {"routed_scaling_factor 1e38", [](json& j) { j["routed_scaling_factor"] = 1e38; },
       "route_scale (routed_scaling_factor) must be a finite number of at most 1e6"},
      // an HF config lacking hidden_size is still read as one (it was "unknown config key
      // architectures")
      {"no hidden_size", [](json& j) { j.erase("hidden_size"); }, "HF config lacks hidden_size"},
      {"no hidden_size, no architectures",
       [](json& j) {
         j.erase("hidden_size");
         j.erase("architectures");
       },
       "HF config lacks hidden_size"},
      {"only model_type and layers",
       [](json& j) {
         j = json{{"model_type", "deepseek_v3"}, {"num_hidden_layers", 3}};
       },
       "HF config lacks"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json j = base;
    c.edit(j);
    std::string msg = error_of([&] { parse_config_json(j.dump(), "hf/config.json"); });
    EXPECT_CONTAINS(msg, "hf/config.json");
    EXPECT_CONTAINS(msg, c.message);
  }
}

TEST(Config, UnknownKeyInReferenceFormIsAnErrorNamingIt) {
  const std::string dir = scratch_dir("unknown");
  const std::string path = dir + "/config.json";
  json j = json::parse(read_file(config_path("config_671B.json")));
  j["n_experts"] = 256;
  write_file(path, j.dump());
  std::string msg = error_of([&] { load_config(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "\"n_experts\"");
}

TEST(Config, BadTypesInReferenceForm) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"dim": "2048"})", "dim must be an integer"},
      {R"({"dim": 2048.5})", "dim must be an integer"},
      {R"({"dim": true})", "dim must be an integer"},
      {R"({"dim": null})", "dim must be an integer"},
      {R"({"dim": [2048]})", "dim must be an integer"},
      {R"({"dim": 4294967296})", "dim is out of range, got 4294967296"},  // would wrap to 0
      {R"({"dim": 3000000000})", "dim is out of range"},
      {R"({"dim": -3000000000})", "dim is out of range"},
      {R"({"dim": 1e300})", "dim is out of range"},  // casting would be undefined
      {R"({"dim": 2147483647.5})", "dim must be an integer"},
      {R"({"route_scale": "2.5"})", "route_scale must be a number"},
      {R"({"rope_theta": 1})", "rope_theta must be a finite number > 1"},
      {R"({"route_scale": null})", "route_scale must be a number"},
      {R"({"dtype": "fp16"})", "dtype must be bf16 or fp8"},
      {R"({"dtype": 8})", "dtype must be a string"},
      {R"({"score_func": "tanh"})", "score_func must be softmax or sigmoid"},
      {R"({"scale_fmt": "e4m3"})", "scale_fmt must be null or ue8m0"},
      {R"({"scale_fmt": 1})", "scale_fmt must be a string"},
      {"[1, 2]", "not a JSON object"},
      {"{\"dim\": ", "not valid JSON"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    std::string msg = error_of([&] { parse_config_json(c.json, "cfg.json"); });
    EXPECT_CONTAINS(msg, "cfg.json");
    EXPECT_CONTAINS(msg, c.message);
  }
  // Integral floats are integers (json writers sometimes emit 4096.0); null scale_fmt is None.
  const ModelConfig c =
      parse_config_json(R"({"dim": 4096.0, "scale_fmt": null, "rope_theta": 10000})", "ok");
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.scale_fmt, "");
  EXPECT_EQ(c.rope_theta, 10000.0);
}

TEST(Config, MissingFileIsAnErrorNamingIt) {
  const std::string path = scratch_dir("missing") + "/nope.json";
  std::string msg = error_of([&] { load_config(path); });
  EXPECT_CONTAINS(msg, path);
}

TEST(Config, ValidateRejectsImpossibleValues) {
  struct Case {
    const char* what;
    std::function<void(ModelConfig&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"groups do not divide", [](ModelConfig& c) { c.n_expert_groups = 5; },
       "n_expert_groups must divide"},
      {"infinite route_scale", [](ModelConfig& c) { c.route_scale = INFINITY; },
       "route_scale (routed_scaling_factor)"},
      {"NaN route_scale", [](ModelConfig& c) { c.route_scale = NAN; }, "route_scale"},
      {"NaN rope_theta", [](ModelConfig& c) { c.rope_theta = NAN; }, "rope_theta"},
      {"NaN mscale", [](ModelConfig& c) { c.mscale = NAN; }, "mscale must be a finite number"},
      {"zero groups", [](ModelConfig& c) { c.n_expert_groups = 0; }, "n_expert_groups"},
      {"limited > groups",
       [](ModelConfig& c) {
         c.n_expert_groups = 2;
         c.n_limited_groups = 3;
       },
       "n_limited_groups"},
      {"zero limited", [](ModelConfig& c) { c.n_limited_groups = 0; }, "n_limited_groups"},
      {"too many activated for the groups",
       [](ModelConfig& c) {
         c.n_expert_groups = 8;
         c.n_limited_groups = 1;
         c.n_activated_experts = 9;
       },
       "n_activated_experts exceeds"},
      {"activated > experts", [](ModelConfig& c) { c.n_activated_experts = 65; },
       "n_activated_experts"},
      {"zero activated", [](ModelConfig& c) { c.n_activated_experts = 0; }, "n_activated_experts"},
      {"zero experts", [](ModelConfig& c) { c.n_routed_experts = 0; }, "n_routed_experts"},
      {"zero dim", [](ModelConfig& c) { c.dim = 0; }, "dim must be positive"},
      {"negative vocab", [](ModelConfig& c) { c.vocab_size = -1; }, "vocab_size must be positive"},
      {"zero layers", [](ModelConfig& c) { c.n_layers = 0; }, "n_layers"},
      {"zero heads", [](ModelConfig& c) { c.n_heads = 0; }, "n_heads"},
      {"odd rope dim", [](ModelConfig& c) { c.qk_rope_head_dim = 63; }, "qk_rope_head_dim"},
      {"negative q_lora_rank", [](ModelConfig& c) { c.q_lora_rank = -1; }, "q_lora_rank"},
      {"dense > layers", [](ModelConfig& c) { c.n_dense_layers = 28; }, "n_dense_layers"},
      {"negative dense", [](ModelConfig& c) { c.n_dense_layers = -1; }, "n_dense_layers"},
      {"zero batch", [](ModelConfig& c) { c.max_batch_size = 0; }, "max_batch_size"},
      {"zero seq", [](ModelConfig& c) { c.max_seq_len = 0; }, "max_seq_len"},
      {"zero inter_dim with dense layers", [](ModelConfig& c) { c.inter_dim = 0; }, "inter_dim"},
      {"zero moe_inter_dim", [](ModelConfig& c) { c.moe_inter_dim = 0; }, "moe_inter_dim"},
      {"bad scale_fmt", [](ModelConfig& c) { c.scale_fmt = "e8m0"; }, "scale_fmt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelConfig config;
    c.edit(config);
    std::string msg = error_of([&] { config.validate(); });
    EXPECT_CONTAINS(msg, c.message);
  }
  // All-dense models need no experts at all.
  ModelConfig dense;
  dense.n_dense_layers = dense.n_layers;
  dense.n_routed_experts = 0;
  dense.n_activated_experts = 0;
  EXPECT_NO_THROW(dense.validate());
  // The error from parse_config_json names the file.
  std::string msg =
      error_of([&] { parse_config_json(R"({"n_expert_groups": 5})", "x/config.json"); });
  EXPECT_CONTAINS(msg, "x/config.json");
  EXPECT_CONTAINS(msg, "n_expert_groups must divide");
}

TEST(Config, Summary) {
  const ModelConfig c = load_config(config_path("config_671B.json"));
  const std::string s = c.summary();
  EXPECT_EQ(s.rfind("ModelArgs(", 0), 0u);
  EXPECT_CONTAINS(s, "dtype=fp8");
  EXPECT_CONTAINS(s, "score_func=sigmoid");
  EXPECT_CONTAINS(s, "n_expert_groups=8");
  EXPECT_CONTAINS(s, "route_scale=2.5");
}

// Equality and the ranks' agreement compare every ModelArgs field exactly (a double that prints
// alike in the summary still differs), and say which fields differ.
TEST(Config, FieldWiseEqualityAndDifferences) {
  const ModelConfig a = load_config(config_path("config_671B.json"));
  ModelConfig b = a;
  EXPECT_TRUE(a == b);
  b.eos_token_id = 7;  // informational: not a difference
  EXPECT_TRUE(a == b);
  b.rope_theta = a.rope_theta * (1 + 1e-12);
  b.scale_fmt = "ue8m0";
  EXPECT_FALSE(a == b);
  ModelConfig theta_only = a;
  theta_only.rope_theta = b.rope_theta;
  EXPECT_EQ(a.summary(), theta_only.summary()) << "the summary rounds";
  EXPECT_FALSE(a == theta_only);
  const auto diff = config_differences(a.fields(), b.fields());
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_CONTAINS(diff[0], "scale_fmt= against scale_fmt=ue8m0");
  EXPECT_CONTAINS(diff[1], "rope_theta=10000 against rope_theta=10000.00000001");
}

}  // namespace
}  // namespace dsinfer::config_test
