#include "model/config.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/read_file.h"
#include "io/json_file.h"

namespace dsinfer {

using json = nlohmann::json;

namespace {

template <typename T>
T get_as(const json& value, const std::string& key, const std::string& origin) {
  try {
    if constexpr (std::is_same_v<T, int>) {
      // Integral floats count (some writers emit 4096.0); anything outside int is an error,
      // never a silent wrap-around.
      constexpr double kMin = std::numeric_limits<int>::min(),
                       kMax = std::numeric_limits<int>::max();
      if (value.is_number_unsigned()) {
        const uint64_t v = value.get<uint64_t>();
        check(v <= static_cast<uint64_t>(kMax), origin, ": ", key, " is out of range, got ",
              json_excerpt(value));
        return static_cast<int>(v);
      }
      if (value.is_number_integer()) {
        const int64_t v = value.get<int64_t>();
        check(v >= kMin && v <= kMax, origin, ": ", key, " is out of range, got ",
              json_excerpt(value));
        return static_cast<int>(v);
      }
      check(value.is_number_float() && std::isfinite(value.get<double>()) &&
                std::trunc(value.get<double>()) == value.get<double>(),
            origin, ": ", key, " must be an integer, got ", json_excerpt(value));
      const double v = value.get<double>();
      check(v >= kMin && v <= kMax, origin, ": ", key, " is out of range, got ",
            json_excerpt(value));
      return static_cast<int>(v);
    } else if constexpr (std::is_same_v<T, double>) {
      check(value.is_number(), origin, ": ", key, " must be a number, got ", json_excerpt(value));
      return value.get<double>();
    } else {
      check(value.is_string(), origin, ": ", key, " must be a string, got ", json_excerpt(value));
      return value.get<std::string>();
    }
  } catch (const json::exception& e) {
    fail(origin, ": bad value for ", key, " (", e.what(), ")");
  }
}

ScoreFunc parse_score_func(const std::string& s, const std::string& origin) {
  if (s == "softmax") return ScoreFunc::kSoftmax;
  if (s == "sigmoid") return ScoreFunc::kSigmoid;
  fail(origin, ": score_func must be softmax or sigmoid, got \"", s, "\"");
}

ModelConfig parse_reference_form(const json& j, const std::string& origin) {
  ModelConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto i = [&] { return get_as<int>(v, k, origin); };
    auto d = [&] { return get_as<double>(v, k, origin); };
    if (k == "max_batch_size")
      c.max_batch_size = i();
    else if (k == "max_seq_len")
      c.max_seq_len = i();
    else if (k == "dtype") {
      std::string s = get_as<std::string>(v, k, origin);
      check(s == "bf16" || s == "fp8", origin, ": dtype must be bf16 or fp8, got \"", s, "\"");
      c.dtype = s == "fp8" ? WeightDType::kFP8 : WeightDType::kBF16;
    } else if (k == "scale_fmt")
      c.scale_fmt = v.is_null() ? "" : get_as<std::string>(v, k, origin);
    else if (k == "vocab_size")
      c.vocab_size = i();
    else if (k == "dim")
      c.dim = i();
    else if (k == "inter_dim")
      c.inter_dim = i();
    else if (k == "moe_inter_dim")
      c.moe_inter_dim = i();
    else if (k == "n_layers")
      c.n_layers = i();
    else if (k == "n_dense_layers")
      c.n_dense_layers = i();
    else if (k == "n_heads")
      c.n_heads = i();
    else if (k == "n_routed_experts")
      c.n_routed_experts = i();
    else if (k == "n_shared_experts")
      c.n_shared_experts = i();
    else if (k == "n_activated_experts")
      c.n_activated_experts = i();
    else if (k == "n_expert_groups")
      c.n_expert_groups = i();
    else if (k == "n_limited_groups")
      c.n_limited_groups = i();
    else if (k == "score_func")
      c.score_func = parse_score_func(get_as<std::string>(v, k, origin), origin);
    else if (k == "route_scale")
      c.route_scale = d();
    else if (k == "q_lora_rank")
      c.q_lora_rank = i();
    else if (k == "kv_lora_rank")
      c.kv_lora_rank = i();
    else if (k == "qk_nope_head_dim")
      c.qk_nope_head_dim = i();
    else if (k == "qk_rope_head_dim")
      c.qk_rope_head_dim = i();
    else if (k == "v_head_dim")
      c.v_head_dim = i();
    else if (k == "original_seq_len")
      c.original_seq_len = i();
    else if (k == "rope_theta")
      c.rope_theta = d();
    else if (k == "rope_factor")
      c.rope_factor = d();
    else if (k == "beta_fast")
      c.beta_fast = i();
    else if (k == "beta_slow")
      c.beta_slow = i();
    else if (k == "mscale")
      c.mscale = d();
    else
      fail(origin, ": unknown config key \"", k, "\" (not a ModelArgs field)");
  }
  return c;
}

// HF config.json -> ModelArgs, the way the reference's configs/*.json were written from it.
ModelConfig parse_hf_form(const json& j, const std::string& origin) {
  ModelConfig c;
  auto req = [&](const char* key) -> const json& {
    check(j.contains(key) && !j[key].is_null(), origin, ": HF config lacks ", key);
    return j[key];
  };
  auto opt_int = [&](const char* key, int& field) {
    if (j.contains(key) && !j[key].is_null()) field = get_as<int>(j[key], key, origin);
  };
  c.vocab_size = get_as<int>(req("vocab_size"), "vocab_size", origin);
  c.dim = get_as<int>(req("hidden_size"), "hidden_size", origin);
  c.inter_dim = get_as<int>(req("intermediate_size"), "intermediate_size", origin);
  opt_int("moe_intermediate_size", c.moe_inter_dim);
  c.n_layers = get_as<int>(req("num_hidden_layers"), "num_hidden_layers", origin);
  opt_int("first_k_dense_replace", c.n_dense_layers);
  c.n_heads = get_as<int>(req("num_attention_heads"), "num_attention_heads", origin);
  opt_int("n_routed_experts", c.n_routed_experts);
  opt_int("n_shared_experts", c.n_shared_experts);
  opt_int("num_experts_per_tok", c.n_activated_experts);
  opt_int("n_group", c.n_expert_groups);
  opt_int("topk_group", c.n_limited_groups);
  if (j.contains("routed_scaling_factor") && !j["routed_scaling_factor"].is_null())
    c.route_scale = get_as<double>(j["routed_scaling_factor"], "routed_scaling_factor", origin);
  if (j.contains("scoring_func") && !j["scoring_func"].is_null())
    c.score_func =
        parse_score_func(get_as<std::string>(j["scoring_func"], "scoring_func", origin), origin);
  opt_int("q_lora_rank", c.q_lora_rank);  // null in V2-Lite means no low-rank q
  c.kv_lora_rank = get_as<int>(req("kv_lora_rank"), "kv_lora_rank", origin);
  c.qk_nope_head_dim = get_as<int>(req("qk_nope_head_dim"), "qk_nope_head_dim", origin);
  c.qk_rope_head_dim = get_as<int>(req("qk_rope_head_dim"), "qk_rope_head_dim", origin);
  c.v_head_dim = get_as<int>(req("v_head_dim"), "v_head_dim", origin);
  if (j.contains("rope_theta"))
    c.rope_theta = get_as<double>(j["rope_theta"], "rope_theta", origin);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& rs = j["rope_scaling"];
    check(rs.is_object(), origin, ": rope_scaling must be an object, got ", json_excerpt(rs));
    if (rs.contains("factor"))
      c.rope_factor = get_as<double>(rs["factor"], "rope_scaling.factor", origin);
    if (rs.contains("original_max_position_embeddings"))
      c.original_seq_len = get_as<int>(rs["original_max_position_embeddings"],
                                       "rope_scaling.original_max_position_embeddings", origin);
    if (rs.contains("beta_fast"))
      c.beta_fast = get_as<int>(rs["beta_fast"], "rope_scaling.beta_fast", origin);
    if (rs.contains("beta_slow"))
      c.beta_slow = get_as<int>(rs["beta_slow"], "rope_scaling.beta_slow", origin);
    // The reference's mscale is the one applied to the softmax scale, i.e. HF's mscale_all_dim.
    if (rs.contains("mscale_all_dim"))
      c.mscale = get_as<double>(rs["mscale_all_dim"], "rope_scaling.mscale_all_dim", origin);
    else if (rs.contains("mscale"))
      c.mscale = get_as<double>(rs["mscale"], "rope_scaling.mscale", origin);
  }
  if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    const json& q = j["quantization_config"];
    check(q.is_object(), origin, ": quantization_config must be an object, got ", json_excerpt(q));
    const std::string method =
        q.contains("quant_method")
            ? get_as<std::string>(q["quant_method"], "quantization_config.quant_method", origin)
            : "";
    check(method == "fp8", origin, ": unsupported quantization method \"", method, "\"");
    c.dtype = WeightDType::kFP8;
    if (q.contains("scale_fmt") && !q["scale_fmt"].is_null())
      c.scale_fmt = get_as<std::string>(q["scale_fmt"], "quantization_config.scale_fmt", origin);
  }
  opt_int("eos_token_id", c.eos_token_id);
  opt_int("bos_token_id", c.bos_token_id);
  return c;
}

// An HF config.json, as opposed to the reference's ModelArgs form: hidden_size, or any key that
// only HF configs have (so that one lacking hidden_size is reported as lacking it, not as a
// ModelArgs file with an unknown key "architectures").
bool is_hf_form(const json& j) {
  for (const char* key :
       {"hidden_size", "architectures", "model_type", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "transformers_version", "torch_dtype"})
    if (j.contains(key)) return true;
  return false;
}

}  // namespace

ModelConfig parse_config_json(const std::string& text, const std::string& origin) {
  const json j = parse_json(text, origin);
  check(j.is_object(), origin, " is not a JSON object");
  ModelConfig c = is_hf_form(j) ? parse_hf_form(j, origin) : parse_reference_form(j, origin);
  try {
    c.validate();
  } catch (const Error& e) {
    fail(origin, ": ", e.what());
  }
  return c;
}

ModelConfig load_config(const std::string& path) {
  return parse_config_json(read_input_file(path, "config", 16 << 20), path);
}

void ModelConfig::validate() const {
  auto positive = [](int v, const char* name) { check(v > 0, name, " must be positive, got ", v); };
  positive(max_batch_size, "max_batch_size");
  positive(max_seq_len, "max_seq_len");
  positive(vocab_size, "vocab_size");
  positive(dim, "dim");
  positive(n_layers, "n_layers");
  positive(n_heads, "n_heads");
  positive(kv_lora_rank, "kv_lora_rank");
  positive(qk_nope_head_dim, "qk_nope_head_dim");
  positive(v_head_dim, "v_head_dim");
  check(qk_rope_head_dim > 0 && qk_rope_head_dim % 2 == 0,
        "qk_rope_head_dim must be positive and even, got ", qk_rope_head_dim);
  check(q_lora_rank >= 0, "q_lora_rank must be >= 0");
  check(n_dense_layers >= 0 && n_dense_layers <= n_layers,
        "n_dense_layers must lie in [0, n_layers]");
  if (n_dense_layers < n_layers) {
    positive(n_routed_experts, "n_routed_experts");
    positive(moe_inter_dim, "moe_inter_dim");
    check(n_shared_experts >= 0, "n_shared_experts must be >= 0");
    check(n_activated_experts > 0 && n_activated_experts <= n_routed_experts,
          "n_activated_experts must lie in [1, n_routed_experts]");
    check(n_expert_groups > 0 && n_routed_experts % n_expert_groups == 0,
          "n_expert_groups must divide n_routed_experts");
    check(n_limited_groups > 0 && n_limited_groups <= n_expert_groups,
          "n_limited_groups must lie in [1, n_expert_groups]");
    check(n_activated_experts <= n_limited_groups * (n_routed_experts / n_expert_groups),
          "n_activated_experts exceeds the experts in n_limited_groups groups");
  }
  if (n_dense_layers > 0) positive(inter_dim, "inter_dim");
  check(scale_fmt.empty() || scale_fmt == "ue8m0", "scale_fmt must be null or ue8m0");
  // what the reference's math needs (it raises on these; here they would be NaN logits and an
  // empty completion): the frequencies divide by log(rope_theta), YaRN takes log(rope_factor) and
  // log(original_seq_len / (beta * 2 pi)), the routed output is scaled by route_scale
  // Checked as the floats the math uses, not only as doubles: a factor of 1e-300 passed as a
  // double and was 0 as a float, and 1e38 or 1e200 overflowed the products they scale.
  auto normal_float = [](double x) {
    const float f = static_cast<float>(x);
    return std::isfinite(f) && (x == 0 || f != 0) && std::fabs(x) <= 1e30;
  };
  check(std::isfinite(rope_theta) && rope_theta > 1 && normal_float(rope_theta),
        "rope_theta must be a finite number > 1, got ", rope_theta);
  check(std::isfinite(rope_factor) && rope_factor > 0 && normal_float(rope_factor),
        "rope_factor (rope_scaling.factor) must be a finite number > 0 that a float holds, got ",
        rope_factor);
  positive(original_seq_len, "original_seq_len (rope_scaling.original_max_position_embeddings)");
  positive(beta_fast, "beta_fast");
  positive(beta_slow, "beta_slow");
  check(std::isfinite(mscale) && normal_float(mscale),
        "mscale must be a finite number that a float holds, got ", mscale);
  // YaRN's factor on the softmax scale, (0.1 mscale ln(rope_factor) + 1)^2 (model/rope.cpp)
  const double softmax_factor = std::pow(0.1 * mscale * std::log(rope_factor) + 1.0, 2);
  check(normal_float(softmax_factor) && softmax_factor <= 1e6, "mscale ", mscale,
        " with rope_factor ", rope_factor, " makes the softmax scale's factor ", softmax_factor,
        ", which the attention scores cannot take");
  // real checkpoints scale the routed experts by 1 to 16; a factor past 1e6 overflows fp32
  check(std::isfinite(route_scale) && std::fabs(route_scale) <= 1e6,
        "route_scale (routed_scaling_factor) must be a finite number of at most 1e6, got ",
        route_scale);
}

std::string ModelConfig::summary() const {
  return cat("ModelArgs(max_batch_size=", max_batch_size, ", max_seq_len=", max_seq_len,
             ", dtype=", dtype == WeightDType::kFP8 ? "fp8" : "bf16", ", vocab_size=", vocab_size,
             ", dim=", dim, ", inter_dim=", inter_dim, ", moe_inter_dim=", moe_inter_dim,
             ", n_layers=", n_layers, ", n_dense_layers=", n_dense_layers, ", n_heads=", n_heads,
             ", n_routed_experts=", n_routed_experts, ", n_shared_experts=", n_shared_experts,
             ", n_activated_experts=", n_activated_experts, ", n_expert_groups=", n_expert_groups,
             ", n_limited_groups=", n_limited_groups,
             ", score_func=", score_func == ScoreFunc::kSigmoid ? "sigmoid" : "softmax",
             ", route_scale=", route_scale, ", q_lora_rank=", q_lora_rank,
             ", kv_lora_rank=", kv_lora_rank, ", qk_nope_head_dim=", qk_nope_head_dim,
             ", qk_rope_head_dim=", qk_rope_head_dim, ", v_head_dim=", v_head_dim,
             ", original_seq_len=", original_seq_len, ", rope_theta=", rope_theta,
             ", rope_factor=", rope_factor, ", beta_fast=", beta_fast, ", beta_slow=", beta_slow,
             ", mscale=", mscale, ")");
}

ModelConfig::Fields ModelConfig::fields() const {
  auto exact = [](double v) {
    std::ostringstream out;
    out.precision(17);
    out << v;
    return out.str();
  };
  auto i = [](int v) { return std::to_string(v); };
  return {{"max_batch_size", i(max_batch_size)},
          {"max_seq_len", i(max_seq_len)},
          {"dtype", dtype == WeightDType::kFP8 ? "fp8" : "bf16"},
          {"scale_fmt", scale_fmt},
          {"vocab_size", i(vocab_size)},
          {"dim", i(dim)},
          {"inter_dim", i(inter_dim)},
          {"moe_inter_dim", i(moe_inter_dim)},
          {"n_layers", i(n_layers)},
          {"n_dense_layers", i(n_dense_layers)},
          {"n_heads", i(n_heads)},
          {"n_routed_experts", i(n_routed_experts)},
          {"n_shared_experts", i(n_shared_experts)},
          {"n_activated_experts", i(n_activated_experts)},
          {"n_expert_groups", i(n_expert_groups)},
          {"n_limited_groups", i(n_limited_groups)},
          {"score_func", score_func == ScoreFunc::kSigmoid ? "sigmoid" : "softmax"},
          {"route_scale", exact(route_scale)},
          {"q_lora_rank", i(q_lora_rank)},
          {"kv_lora_rank", i(kv_lora_rank)},
          {"qk_nope_head_dim", i(qk_nope_head_dim)},
          {"qk_rope_head_dim", i(qk_rope_head_dim)},
          {"v_head_dim", i(v_head_dim)},
          {"original_seq_len", i(original_seq_len)},
          {"rope_theta", exact(rope_theta)},
          {"rope_factor", exact(rope_factor)},
          {"beta_fast", i(beta_fast)},
          {"beta_slow", i(beta_slow)},
          {"mscale", exact(mscale)}};
}

std::vector<std::string> config_differences(const ModelConfig::Fields& a,
                                            const ModelConfig::Fields& b) {
  std::vector<std::string> out;
  for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
    const std::string x = k < a.size() ? a[k].first + "=" + a[k].second : "(none)";
    const std::string y = k < b.size() ? b[k].first + "=" + b[k].second : "(none)";
    if (x != y) out.push_back(x + " against " + y);
  }
  return out;
}

}  // namespace dsinfer
