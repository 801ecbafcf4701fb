#include "model/weights.h"

#include <filesystem>
#include <regex>
#include <set>

#include "core/error.h"
#include "model/quantization.h"

namespace dsinfer {

namespace {

// Hands out tensors of one shard file by name, checking each against the shape the config
// implies, and remembers which ones were used so leftovers can be reported.
class ShardReader {
 public:
  ShardReader(const ModelConfig& config, const SafetensorsFile& file)
      : config_(config),
        file_(file),
        quantization_(quantization_of(file.metadata(), file.path())) {}

  const Quantization& quantization() const { return quantization_; }

  const TensorView& tensor(const std::string& name, const std::vector<int64_t>& shape) {
    check(file_.contains(name), file_.path(), ": missing tensor ", name, " (expected shape ",
          shape_string(shape), "); does the config match the checkpoint?");
    const TensorView& t = file_.get(name);
    check(t.shape == shape, file_.path(), ": tensor ", name, " has shape ", shape_string(t.shape),
          " but the config implies ", shape_string(shape));
    used_.insert(name);
    return t;
  }

  // A weight that is NaN or infinite makes every product with it NaN: the answers would be empty
  // or, for fp8's NaN codes (which the vector kernels decode as finite numbers), differ from one
  // machine to the next. The small tensors (norms, biases, block and group scales) are checked
  // here, naming the element; the matrices at convert (a pass over them all here costs ~1 s per
  // GB, 4.7 s on the 5.9 GB slice against a 1 s load from the page cache).
  void check_finite(const TensorView& t) const {
    const std::string problem = t.non_finite_element();
    check(problem.empty(), file_.path(), ": tensor ", t.name, " ", problem,
          ": the file is damaged or was converted from a damaged checkpoint (convert it again)");
  }

  // A vector (norm weights, router bias) widened to fp32.
  std::vector<float> vector(const std::string& name, int64_t n) {
    const TensorView& t = tensor(name, {n});
    check_finite(t);
    std::vector<float> out(n);
    for (int64_t i = 0; i < n; ++i) {
      switch (t.dtype) {
        case DType::kF32:
          out[i] = reinterpret_cast<const float*>(t.data)[i];
          break;
        case DType::kBF16:
          out[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i]);
          break;
        default:
          fail(file_.path(), ": tensor ", name, " has dtype ", dtype_name(t.dtype),
               "; expected BF16 or F32");
      }
    }
    return out;
  }

  // A matrix kept in its file dtype: bf16/f32 (embedding, head, router), never fp8.
  WeightMatrix plain_matrix(const std::string& name, int64_t rows, int64_t cols) {
    const TensorView& t = tensor(name, {rows, cols});
    check(t.dtype == DType::kBF16 || t.dtype == DType::kF32, file_.path(), ": tensor ", name,
          " has dtype ", dtype_name(t.dtype), "; expected BF16 or F32");
    return WeightMatrix{t.dtype, rows, cols, t.data, nullptr};
  }

  // The head: bf16 (or f32), or int8 in a shard converted with --int8.
  WeightMatrix head(int64_t rows, int64_t cols) {
    if (quantization_.linear_int8) return quantized("head", rows, cols, QuantFormat::kInt8);
    return plain_matrix("head.weight", rows, cols);
  }

  // A Linear: int4 / int8 where the shard's metadata says so (routed experts: `routed_expert`),
  // else fp8 with a block scale when the config says dtype fp8, bf16 (or f32) otherwise.
  WeightMatrix linear(const std::string& prefix, int64_t rows, int64_t cols,
                      bool routed_expert = false) {
    if (const auto format = quantization_.format_of(routed_expert))
      return quantized(prefix, rows, cols, *format);
    const std::string name = prefix + ".weight";
    if (file_.contains(name)) {
      const DType dtype = file_.get(name).dtype;
      check(dtype != kInt4Storage && dtype != kInt8Storage, file_.path(), ": tensor ", name,
            " has dtype ", dtype_name(dtype),
            " (an int4 / int8 weight of convert --experts-int4 / --int8) but the shard's metadata ",
            "says ", quantization_.describe(), ": shards of different converts mixed?");
    }
    const TensorView& t = tensor(name, {rows, cols});
    WeightMatrix w{t.dtype, rows, cols, t.data, nullptr};
    if (config_.dtype == WeightDType::kFP8) {
      check(t.dtype == DType::kF8E4M3, file_.path(), ": tensor ", name, " has dtype ",
            dtype_name(t.dtype), " but the config says dtype fp8 (F8_E4M3)");
      const TensorView& s =
          tensor(prefix + ".scale", {ceil_div(rows, kFp8Block), ceil_div(cols, kFp8Block)});
      check(s.dtype == DType::kF32, file_.path(), ": tensor ", s.name, " has dtype ",
            dtype_name(s.dtype), "; expected F32");
      check_finite(s);
      w.scale = reinterpret_cast<const float*>(s.data);
    } else {
      check(t.dtype == DType::kBF16 || t.dtype == DType::kF32, file_.path(), ": tensor ", name,
            " has dtype ", dtype_name(t.dtype), " but the config says dtype bf16");
    }
    return w;
  }

  MlpWeights mlp(const std::string& prefix, int64_t inter, int64_t dim,
                 bool routed_expert = false) {
    return MlpWeights{linear(prefix + ".w1", inter, dim, routed_expert),
                      linear(prefix + ".w2", dim, inter, routed_expert),
                      linear(prefix + ".w3", inter, dim, routed_expert)};
  }

  bool contains(const std::string& name) const { return file_.contains(name); }

  void check_all_used() const {
    for (const auto& [name, view] : file_.tensors())
      check(used_.count(name), file_.path(), ": unexpected tensor ", name,
            " (not part of the model the config describes; wrong config or checkpoint?)");
  }

 private:
  // An int4 / int8 weight: prefix.weight [rows, stored row bytes] (U8 / I8) and prefix.scale
  // [rows, ceil(cols / 128)] (F16), as convert writes them.
  WeightMatrix quantized(const std::string& prefix, int64_t rows, int64_t cols,
                         QuantFormat format) {
    const std::string name = prefix + ".weight";
    const DType storage = format == QuantFormat::kInt4 ? kInt4Storage : kInt8Storage;
    check(file_.contains(name), file_.path(), ": missing tensor ", name,
          "; does the config match the checkpoint?");
    const TensorView& t = file_.get(name);
    check(t.dtype == storage, file_.path(), ": tensor ", name, " has dtype ", dtype_name(t.dtype),
          " but the shard's metadata says ", quantization_.describe(), " (",
          quant_format_name(format), ": ", dtype_name(storage),
          "): shards of different converts mixed?");
    const TensorView& w = tensor(name, {rows, quant_row_bytes(format, cols)});
    const TensorView& s = tensor(prefix + ".scale", {rows, quant_groups(cols)});
    check(s.dtype == DType::kF16, file_.path(), ": tensor ", s.name, " has dtype ",
          dtype_name(s.dtype), "; expected F16 (", quant_format_name(format), " group scales)");
    check_finite(s);
    WeightMatrix m{storage, rows, cols, w.data, nullptr};
    m.group_scale = reinterpret_cast<const uint16_t*>(s.data);
    return m;
  }

  const ModelConfig& config_;
  const SafetensorsFile& file_;
  Quantization quantization_;
  std::set<std::string> used_;
};

}  // namespace

namespace {

// One MLA + MoE (or dense) block whose tensors are named prefix + ".attn_norm.weight" etc.
LayerWeights read_layer(ShardReader& reader, const ModelConfig& c, const ShardPlan& plan,
                        const std::string& p, bool is_moe) {
  const int64_t dim = c.dim;
  const int64_t H = plan.n_local_heads;
  LayerWeights layer;
  layer.attn_norm = reader.vector(p + ".attn_norm.weight", dim);
  layer.ffn_norm = reader.vector(p + ".ffn_norm.weight", dim);
  AttentionWeights& a = layer.attn;
  if (c.q_lora_rank == 0) {
    a.wq = reader.linear(p + ".attn.wq", H * c.qk_head_dim(), dim);
  } else {
    a.wq_a = reader.linear(p + ".attn.wq_a", c.q_lora_rank, dim);
    a.q_norm = reader.vector(p + ".attn.q_norm.weight", c.q_lora_rank);
    a.wq_b = reader.linear(p + ".attn.wq_b", H * c.qk_head_dim(), c.q_lora_rank);
  }
  a.wkv_a = reader.linear(p + ".attn.wkv_a", c.kv_lora_rank + c.qk_rope_head_dim, dim);
  a.kv_norm = reader.vector(p + ".attn.kv_norm.weight", c.kv_lora_rank);
  a.wkv_b =
      reader.linear(p + ".attn.wkv_b", H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
  a.wo = reader.linear(p + ".attn.wo", dim, H * c.v_head_dim);
  layer.is_moe = is_moe;
  if (!layer.is_moe) {
    layer.mlp = reader.mlp(p + ".ffn", plan.inter_local, dim);
  } else {
    MoeWeights& m = layer.moe;
    m.gate = reader.plain_matrix(p + ".ffn.gate.weight", c.n_routed_experts, dim);
    // The router's selection bias (V3's e_score_correction_bias): V3's sigmoid routing
    // (noaux_tc) needs it, so there a missing one is an error naming it (without it the model
    // routes differently and answers other text, silently); elsewhere it is used when present.
    // The reference demo keys it on dim == 7168, which only fits the real V3.
    if (c.score_func == ScoreFunc::kSigmoid || reader.contains(p + ".ffn.gate.bias"))
      m.gate_bias = reader.vector(p + ".ffn.gate.bias", c.n_routed_experts);
    for (int e = 0; e < plan.n_local_experts; ++e)
      m.experts.push_back(reader.mlp(p + ".ffn.experts." + std::to_string(plan.experts_begin + e),
                                     c.moe_inter_dim, dim, /*routed_expert=*/true));
    if (c.n_shared_experts > 0)
      m.shared = reader.mlp(p + ".ffn.shared_experts", plan.shared_inter_local, dim);
  }
  return layer;
}

}  // namespace

ModelWeights load_weights(const ModelConfig& c, const ShardPlan& plan,
                          std::shared_ptr<SafetensorsFile> file) {
  ShardReader reader(c, *file);
  ModelWeights w;
  w.file = file;
  const int64_t dim = c.dim;
  w.embed = reader.plain_matrix("embed.weight", plan.vocab_local, dim);
  for (int i = 0; i < c.n_layers; ++i)
    w.layers.push_back(
        read_layer(reader, c, plan, "layers." + std::to_string(i), c.is_moe_layer(i)));
  w.norm = reader.vector("norm.weight", dim);
  w.head = reader.head(plan.vocab_local, dim);
  w.quantization = reader.quantization();
  reader.check_all_used();
  return w;
}

MtpWeights load_mtp_weights(const ModelConfig& c, const ShardPlan& plan,
                            std::shared_ptr<SafetensorsFile> file) {
  ShardReader reader(c, *file);
  MtpWeights w;
  w.file = file;
  const int64_t dim = c.dim;
  w.enorm = reader.vector("mtp.enorm.weight", dim);
  w.hnorm = reader.vector("mtp.hnorm.weight", dim);
  w.eh_proj = reader.plain_matrix("mtp.eh_proj.weight", dim, 2 * dim);
  // the module sits at layer num_hidden_layers, past first_k_dense_replace: an MoE block in V3
  w.block = read_layer(reader, c, plan, "mtp", c.is_moe_layer(c.n_layers));
  w.head_norm = reader.vector("mtp.head_norm.weight", dim);
  if (reader.contains("mtp.embed.weight"))
    w.embed = reader.plain_matrix("mtp.embed.weight", plan.vocab_local, dim);
  if (reader.contains("mtp.head.weight"))
    w.head = reader.plain_matrix("mtp.head.weight", plan.vocab_local, dim);
  reader.check_all_used();
  return w;
}

std::string mtp_shard_path(const std::string& ckpt_dir, int rank, int world_size) {
  const std::string path =
      (std::filesystem::path(ckpt_dir) /
       ("mtp" + std::to_string(rank) + "-mp" + std::to_string(world_size) + ".safetensors"))
          .string();
  check(std::filesystem::exists(path), "missing ", path,
        ": the multi-token-prediction module is kept only by "
        "`dsinfer convert --keep-mtp` (V3/R1 checkpoints; V2 and V2-Lite have none)");
  return path;
}

std::string shard_path(const std::string& ckpt_dir, int rank, int world_size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check(fs::is_directory(ckpt_dir, ec), "checkpoint directory ", ckpt_dir, " does not exist");
  const std::string name =
      "model" + std::to_string(rank) + "-mp" + std::to_string(world_size) + ".safetensors";
  const fs::path path = fs::path(ckpt_dir) / name;
  if (fs::exists(path)) return path.string();
  std::set<std::string> sets;
  const std::regex pattern(R"(model(\d+)-mp(\d+)\.safetensors)");
  for (const auto& entry : fs::directory_iterator(ckpt_dir)) {
    std::smatch m;
    std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, pattern)) sets.insert("mp" + m[2].str());
  }
  std::string found;
  for (const auto& s : sets) found += (found.empty() ? "" : ", ") + s;
  fail("missing shard ", path.string(), " for rank ", rank, " of world size ", world_size,
       found.empty()
           ? std::string("; the directory holds no converted shards (run dsinfer convert)")
           : "; the directory holds shard sets " + found +
                 " (the world size must equal the convert --model-parallel)");
}

}  // namespace dsinfer
