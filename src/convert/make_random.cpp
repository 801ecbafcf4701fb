// make-random: the tensor table of an HF checkpoint from its config, and deterministic random
// bytes for each tensor, streamed into shard files a chunk at a time.
#include "convert/make_random.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convert/convert.h"
#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/log.h"
#include "core/write_file.h"
#include "io/checkpoint_dir.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace dsinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

uint64_t RandomTensor::n_bytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

namespace {

// ---- the tensor table ------------------------------------------------------------------------

// What the config says beyond ModelConfig (HF-only fields that change the tensor list).
struct Layout {
  ModelConfig c;
  bool fp8 = false;
  bool router_bias = false;  // noaux_tc: gate.e_score_correction_bias
  int mtp_layers = 0;        // num_nextn_predict_layers
};

int optional_int(const json& j, const char* key, int fallback, const std::string& origin) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  check(j[key].is_number_integer(), origin, ": ", key, " must be an integer, got ",
        json_excerpt(j[key]));
  return j[key].get<int>();
}

Layout read_layout(const std::string& text, const std::string& origin) {
  const json j = parse_json(text, origin);
  check(j.is_object() && j.contains("hidden_size"), origin,
        " is not a Hugging Face config.json (no hidden_size); make-random needs the HF form");
  Layout layout;
  layout.c = parse_config_json(text, origin);  // the engine's own reading, validated
  // The engine's reading falls back to ModelArgs' defaults (V2-Lite's sizes) for these; a random
  // checkpoint silently built at the wrong size would mislead a benchmark, so they must be spelled
  // out (q_lora_rank may be null: no low-rank q, as in V2-Lite).
  for (const char* key : {"moe_intermediate_size", "n_routed_experts", "n_shared_experts",
                          "num_experts_per_tok", "first_k_dense_replace"})
    check(j.contains(key) && !j[key].is_null(), origin, ": HF config lacks ", key,
          " (make-random does not guess sizes)");
  check(j.contains("q_lora_rank"), origin,
        ": HF config lacks q_lora_rank (null for no low-rank q, as in V2-Lite)");
  layout.fp8 = layout.c.dtype == WeightDType::kFP8;
  if (layout.fp8 && j["quantization_config"].contains("weight_block_size")) {
    const json& block = j["quantization_config"]["weight_block_size"];
    check(block == json::array({kFp8Block, kFp8Block}), origin,
          ": quantization_config.weight_block_size must be [128, 128] (the only fp8 block the "
          "engine reads), got ",
          json_excerpt(block));
  }
  const int freq = optional_int(j, "moe_layer_freq", 1, origin);
  check(freq == 1, origin, ": moe_layer_freq ", freq,
        " is not supported (every DeepSeek model has 1: all layers from first_k_dense_replace on "
        "are MoE)");
  layout.router_bias = j.value("topk_method", std::string()) == "noaux_tc";
  layout.mtp_layers = optional_int(j, "num_nextn_predict_layers", 0, origin);
  check(layout.mtp_layers >= 0, origin, ": num_nextn_predict_layers must not be negative");
  return layout;
}

class TableBuilder {
 public:
  explicit TableBuilder(const Layout& layout) : l_(layout) {}

  std::vector<RandomTensor> build() {
    const ModelConfig& c = l_.c;
    bf16("model.embed_tokens.weight", {c.vocab_size, c.dim}, 1.0f);
    for (int layer = 0; layer < c.n_layers + l_.mtp_layers; ++layer) add_layer(layer);
    ones("model.norm.weight", c.dim);
    bf16("lm_head.weight", {c.vocab_size, c.dim}, head_std());
    return std::move(out_);
  }

 private:
  float head_std() const { return 1.0f / std::sqrt(static_cast<float>(l_.c.dim)); }

  void add(std::string name, DType dtype, std::vector<int64_t> shape, RandomInit init, float std) {
    out_.push_back({std::move(name), dtype, std::move(shape), init, std, ""});
  }
  void ones(const std::string& name, int64_t n) {
    add(name, DType::kBF16, {n}, RandomInit::kOnes, 0);
  }
  void bf16(const std::string& name, std::vector<int64_t> shape, float std) {
    add(name, DType::kBF16, std::move(shape), RandomInit::kNormal, std);
  }
  // A Linear's weight [rows, cols]: fp8 + block scales when the checkpoint is fp8, else bf16.
  void linear(const std::string& prefix, int64_t rows, int64_t cols) {
    const float std = 1.0f / std::sqrt(static_cast<float>(cols));
    if (!l_.fp8) return bf16(prefix + ".weight", {rows, cols}, std);
    add(prefix + ".weight", DType::kF8E4M3, {rows, cols}, RandomInit::kNormal, std);
    add(prefix + ".weight_scale_inv", DType::kF32,
        {ceil_div(rows, kFp8Block), ceil_div(cols, kFp8Block)}, RandomInit::kBlockScale, std);
  }
  void mlp(const std::string& prefix, int64_t inter) {
    linear(prefix + ".gate_proj", inter, l_.c.dim);
    linear(prefix + ".up_proj", inter, l_.c.dim);
    linear(prefix + ".down_proj", l_.c.dim, inter);
  }

  void add_layer(int layer) {
    const ModelConfig& c = l_.c;
    const std::string p = cat("model.layers.", layer);
    const int64_t heads = c.n_heads, dim = c.dim;
    if (layer >= c.n_layers) {
      // multi-token prediction: its projection, and copies of the embedding and the head (the
      // real checkpoints' copies are bitwise equal to the main tensors)
      bf16(p + ".embed_tokens.weight", {c.vocab_size, dim}, 1.0f);
      out_.back().stream = "model.embed_tokens.weight";
      ones(p + ".enorm.weight", dim);
      ones(p + ".hnorm.weight", dim);
      bf16(p + ".eh_proj.weight", {dim, 2 * dim}, 1.0f / std::sqrt(2.0f * static_cast<float>(dim)));
      ones(p + ".shared_head.norm.weight", dim);
      bf16(p + ".shared_head.head.weight", {c.vocab_size, dim}, head_std());
      out_.back().stream = "lm_head.weight";
    }
    ones(p + ".input_layernorm.weight", dim);
    const std::string a = p + ".self_attn";
    if (c.q_lora_rank > 0) {
      linear(a + ".q_a_proj", c.q_lora_rank, dim);
      ones(a + ".q_a_layernorm.weight", c.q_lora_rank);
      linear(a + ".q_b_proj", heads * c.qk_head_dim(), c.q_lora_rank);
    } else {
      linear(a + ".q_proj", heads * c.qk_head_dim(), dim);
    }
    linear(a + ".kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, dim);
    ones(a + ".kv_a_layernorm.weight", c.kv_lora_rank);
    linear(a + ".kv_b_proj", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    linear(a + ".o_proj", dim, heads * c.v_head_dim);
    ones(p + ".post_attention_layernorm.weight", dim);
    const std::string m = p + ".mlp";
    if (!c.is_moe_layer(layer)) return mlp(m, c.inter_dim);
    bf16(m + ".gate.weight", {c.n_routed_experts, dim}, 1.0f / std::sqrt(static_cast<float>(dim)));
    // Small next to the sigmoid scores (0..1), so it shifts the choice of a few experts only.
    if (l_.router_bias)
      add(m + ".gate.e_score_correction_bias", DType::kF32, {c.n_routed_experts},
          RandomInit::kNormal, 0.01f);
    for (int e = 0; e < c.n_routed_experts; ++e) mlp(cat(m, ".experts.", e), c.moe_inter_dim);
    if (c.n_shared_experts > 0)
      mlp(m + ".shared_experts", int64_t{c.n_shared_experts} * c.moe_inter_dim);
  }

  const Layout& l_;
  std::vector<RandomTensor> out_;
};

// ---- the values ------------------------------------------------------------------------------

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// Per-tensor stream key: the seed and the name, nothing else.
uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return mix64(mix64(seed + kGolden) ^ h);
}

// 16 random bits for element i: word i / 4 of the counter-based stream, lane i % 4.
inline uint32_t bits16(uint64_t key, uint64_t i) {
  return static_cast<uint32_t>(mix64(key + (i / 4 + 1) * kGolden) >> (16 * (i % 4))) & 0xffffu;
}

// Inverse of the standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9).
double inverse_normal_cdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double low = 0.02425;
  if (p < low) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - low) return -inverse_normal_cdf(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// e4m3fn code nearest to v (|v| <= 448), from the decode table.
uint8_t f32_to_fp8_nearest(float v) {
  uint8_t best = 0;
  float best_err = std::fabs(v);
  for (int code = 0; code < 0x7f; ++code) {  // 0x7f is NaN
    const float err = std::fabs(std::fabs(v) - fp8_e4m3_to_f32(static_cast<uint8_t>(code)));
    if (err < best_err) best = static_cast<uint8_t>(code), best_err = err;
  }
  return v < 0 && best != 0 ? static_cast<uint8_t>(best | 0x80) : best;
}

// 65536 quantiles of the standard normal (the midpoints of equal-probability bins), and the fp8
// codes of kFp8CodeStd times each: 16 random bits -> one normal sample by a table look-up.
struct NormalTables {
  std::vector<float> unit;
  std::vector<uint8_t> fp8;
  NormalTables() : unit(65536), fp8(65536) {
    std::array<uint8_t, 65536 / 2> half{};
    for (int u = 0; u < 65536; ++u)
      unit[u] = static_cast<float>(inverse_normal_cdf((u + 0.5) / 65536.0));
    // Symmetric: encode the upper half once and mirror it (the search is slow-ish).
    for (int u = 0; u < 32768; ++u) half[u] = f32_to_fp8_nearest(unit[32768 + u] * kFp8CodeStd);
    for (int u = 0; u < 32768; ++u) {
      fp8[32768 + u] = half[u];
      fp8[32767 - u] = half[u] ? static_cast<uint8_t>(half[u] | 0x80) : 0;
    }
  }
};

const NormalTables& tables() {
  static const NormalTables t;
  return t;
}

// Element i of the tensor, as its dtype's bytes, written to `out`.
void element_bytes(const RandomTensor& t, uint64_t key, uint64_t i, uint8_t* out) {
  const NormalTables& nt = tables();
  float value = 0;
  switch (t.init) {
    case RandomInit::kOnes:
      value = 1.0f;
      break;
    case RandomInit::kNormal:
      if (t.dtype == DType::kF8E4M3) {
        *out = nt.fp8[bits16(key, i)];
        return;
      }
      value = nt.unit[bits16(key, i)] * t.std;
      break;
    case RandomInit::kBlockScale:
      value = t.std / kFp8CodeStd * (0.75f + 0.5f * static_cast<float>(bits16(key, i)) / 65536.0f);
      break;
    default:
      fail("tensor ", t.name, ": bad init");
  }
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out, &value, 4);
      break;
    case DType::kBF16: {
      const uint16_t b = f32_to_bf16(value);
      std::memcpy(out, &b, 2);
      break;
    }
    case DType::kF8E4M3:
      *out = f32_to_fp8_nearest(value);
      break;
    default:
      fail("tensor ", t.name, ": make-random cannot write dtype ", dtype_name(t.dtype));
  }
}

}  // namespace

std::vector<RandomTensor> random_checkpoint_tensors(const std::string& config_text,
                                                    const std::string& origin) {
  const Layout layout = read_layout(config_text, origin);
  return TableBuilder(layout).build();
}

void random_tensor_bytes(const RandomTensor& t, uint64_t seed, uint64_t begin, uint64_t n,
                         uint8_t* out) {
  check(begin + n <= t.n_bytes(), "tensor ", t.name, ": bytes ", begin, "+", n, " past its end ",
        t.n_bytes());
  const uint64_t key = tensor_key(seed, t.stream.empty() ? t.name : t.stream);
  const size_t es = dtype_size(t.dtype);
  if (t.dtype == DType::kF8E4M3 && t.init == RandomInit::kNormal) {  // the bulk: one byte each
    const uint8_t* codes = tables().fp8.data();
    uint64_t i = begin;
    for (; i < begin + n && i % 4; ++i) *out++ = codes[bits16(key, i)];
    for (; i + 4 <= begin + n; i += 4) {
      const uint64_t w = mix64(key + (i / 4 + 1) * kGolden);
      out[0] = codes[w & 0xffff];
      out[1] = codes[(w >> 16) & 0xffff];
      out[2] = codes[(w >> 32) & 0xffff];
      out[3] = codes[w >> 48];
      out += 4;
    }
    for (; i < begin + n; ++i) *out++ = codes[bits16(key, i)];
    return;
  }
  uint8_t element[8];
  for (uint64_t b = begin; b < begin + n;) {  // whole or partial elements
    const uint64_t i = b / es, from = b % es;
    element_bytes(t, key, i, element);
    const uint64_t take = std::min<uint64_t>(es - from, begin + n - b);
    std::memcpy(out, element + from, take);
    out += take;
    b += take;
  }
}

namespace {

std::string read_config_text(const MakeRandomOptions& options) {
  std::error_code ec;
  check(fs::is_regular_file(options.config_path, ec), "--config ", options.config_path,
        " is not a file");
  std::ifstream in(options.config_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  check(in.good() || in.eof(), "cannot read --config ", options.config_path);
  return text.str();
}

// The checkpoint's files: consecutive tensors, a new file before one would pass the limit.
struct RandomShards {
  std::vector<std::vector<const RandomTensor*>> files;
  double total_bytes = 0;
};

RandomShards group_into_files(const std::vector<RandomTensor>& tensors, double limit) {
  RandomShards shards;
  shards.files.resize(1);
  double file_bytes = 0;
  for (const RandomTensor& t : tensors) {
    const double bytes = static_cast<double>(t.n_bytes());
    if (!shards.files.back().empty() && file_bytes + bytes > limit)
      shards.files.emplace_back(), file_bytes = 0;
    shards.files.back().push_back(&t);
    file_bytes += bytes;
    shards.total_bytes += bytes;
  }
  return shards;
}

// Writes `tensors` (the writer's entries) in the order the writer lays them out (by dtype, widest
// first, then by name), so the file fills front to back, a few MB at a time: bounded memory
// whatever the tensor, and big enough writes to be cheap.
void write_tensors(SafetensorsWriter& writer, std::vector<const RandomTensor*> tensors,
                   uint64_t seed, Progress& progress) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const RandomTensor* a, const RandomTensor* b) {
                     const size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
                     return sa != sb ? sa > sb : a->name < b->name;
                   });
  std::vector<uint8_t> buffer(size_t{4} << 20);
  for (const RandomTensor* t : tensors) {
    const uint64_t bytes = t->n_bytes();
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t n = std::min<uint64_t>(buffer.size(), bytes - done);
      random_tensor_bytes(*t, seed, done, n, buffer.data());
      writer.write(t->name, done, buffer.data(), n);
      progress.advance(static_cast<double>(n));
      done += n;
    }
  }
  writer.finish();
}

}  // namespace

void make_random_checkpoint(const MakeRandomOptions& options) {
  const double start = now_seconds();
  check(!options.config_path.empty(), "--config is empty");
  check(!options.out_dir.empty(), "--out is empty");
  check(options.shard_gb > 0, "--shard-gb must be positive (got ", options.shard_gb, ")");
  std::error_code ec;
  const std::string config_text = read_config_text(options);
  const std::vector<RandomTensor> tensors =
      random_checkpoint_tensors(config_text, options.config_path);
  if (!options.tokenizer_from.empty())
    check(fs::is_directory(options.tokenizer_from, ec), "--tokenizer-from ", options.tokenizer_from,
          " is not a directory");

  const RandomShards shards = group_into_files(tensors, options.shard_gb * 1e9);
  const double total = shards.total_bytes;
  const int n_shards = static_cast<int>(shards.files.size());
  auto shard_name = [&](int i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, n_shards);
    return std::string(name);
  };

  convert_detail::make_output_dir(options.out_dir, "--out");
  const fs::space_info space = fs::space(options.out_dir, ec);
  if (!ec)
    check(static_cast<double>(space.available) >= total + 1e6, "--out ", options.out_dir,
          ": the checkpoint needs ", convert_detail::human_bytes(total), " but only ",
          convert_detail::human_bytes(static_cast<double>(space.available)),
          " of disk space is free");

  log_info("make-random: ", tensors.size(), " tensors, ", convert_detail::human_bytes(total),
           " in ", n_shards, n_shards == 1 ? " file" : " files", " -> ", options.out_dir, " (seed ",
           options.seed, ")");
  convert_detail::StagedOutputs staged;
  Progress progress("make-random", total);
  json weight_map = json::object();
  for (int s = 0; s < n_shards; ++s) {
    std::vector<SafetensorsWriter::Entry> entries;
    for (const RandomTensor* t : shards.files[s]) {
      entries.push_back({t->name, t->dtype, t->shape});
      weight_map[t->name] = shard_name(s);
    }
    const std::string path = (fs::path(options.out_dir) / shard_name(s)).string();
    SafetensorsWriter writer(staged.stage(path), std::move(entries), {{"format", "pt"}});
    write_tensors(writer, shards.files[s], options.seed, progress);
  }

  const json index = {{"metadata", {{"total_size", static_cast<uint64_t>(total)}}},
                      {"weight_map", weight_map}};
  auto write_text = [&](const std::string& name, const std::string& body) {
    const std::string staged_path = staged.stage((fs::path(options.out_dir) / name).string());
    write_file_atomically(staged_path, body);
  };
  write_text("model.safetensors.index.json", index.dump(2) + "\n");
  write_text("config.json", config_text);
  staged.commit();
  progress.finish();

  std::string copied;
  if (!options.tokenizer_from.empty()) {
    for (const std::string& path : list_files_containing(options.tokenizer_from, "token")) {
      convert_detail::copy_file_into(path, options.out_dir);
      copied += (copied.empty() ? "; copied " : ", ") + fs::path(path).filename().string();
    }
  }
  for (const std::string& path : list_files(options.out_dir, ".safetensors")) {
    const std::string file = fs::path(path).filename().string();
    bool ours = false;
    for (int s = 0; s < n_shards; ++s) ours = ours || shard_name(s) == file;
    if (!ours)
      log_info("make-random: warning: ", path,
               " is left from an earlier run and not in the new index");
  }
  log_info("make-random: wrote ", n_shards, n_shards == 1 ? " file" : " files", " (",
           tensors.size(), " tensors, ", convert_detail::human_bytes(total), ") to ",
           options.out_dir, " in ", convert_detail::format_seconds(now_seconds() - start), " s",
           copied);
}

}  // namespace dsinfer
