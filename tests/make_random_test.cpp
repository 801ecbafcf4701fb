// `dsinfer make-random`: random checkpoints have exactly the tensors of the real ones (names,
// dtypes, shapes), are deterministic in the seed whatever the shard split, convert and run like a
// real checkpoint, hold weights of the intended scale, and bad input fails naming the culprit.
#include "convert/make_random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "test_support.h"

namespace dsinfer::make_random_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;
using test::run_dsinfer;

struct Header {
  DType dtype;
  std::vector<int64_t> shape;
  bool operator==(const Header&) const = default;
};

std::vector<std::string> shard_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// name -> dtype and shape, over every shard of a checkpoint directory.
std::map<std::string, Header> headers_of(const std::string& dir) {
  std::map<std::string, Header> out;
  for (const std::string& path : shard_files(dir)) {
    SafetensorsFile file(path);
    for (const auto& [name, view] : file.tensors()) {
      EXPECT_EQ(out.count(name), 0u) << name << " in two shards of " << dir;
      out[name] = {view.dtype, view.shape};
    }
  }
  return out;
}

// name -> the tensor's bytes, over every shard of a checkpoint directory.
std::map<std::string, std::string> bytes_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& path : shard_files(dir)) {
    SafetensorsFile file(path);
    for (const auto& [name, view] : file.tensors())
      out[name] = std::string(reinterpret_cast<const char*>(view.data), view.n_bytes);
  }
  return out;
}

test::CommandResult make_random(const std::string& config, const std::string& out,
                                const std::string& extra = "") {
  return run_dsinfer("-q make-random --config " + config + " --out " + out + " " + extra);
}

std::string golden_config(const std::string& model) {
  return data_path("golden/" + model + "/hf/config.json");
}

// ---- the tensor table matches the real checkpoints ----------------------------------------------

class MakeRandomTable : public ::testing::TestWithParam<std::string> {};

TEST_P(MakeRandomTable, SameTensorsAsTheRealCheckpoint) {
  const std::string model = GetParam();
  const std::string real = data_path("golden/" + model + "/hf");
  if (!fs::is_directory(real)) GTEST_SKIP() << real << " is not bundled";
  const std::string out = test::scratch_dir("hf");
  auto r = make_random(real + "/config.json", out);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const auto want = headers_of(real), got = headers_of(out);
  ASSERT_FALSE(want.empty());
  for (const auto& [name, header] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "make-random lacks " << name;
      continue;
    }
    EXPECT_EQ(dtype_name(it->second.dtype), dtype_name(header.dtype)) << name;
    EXPECT_EQ(shape_string(it->second.shape), shape_string(header.shape)) << name;
  }
  for (const auto& [name, header] : got)
    EXPECT_EQ(want.count(name), 1u) << "make-random writes extra " << name;

  // The library's table is what the files hold, in the same order as the index lists them.
  const auto table = random_checkpoint_tensors(test::read_file(real + "/config.json"), "config");
  ASSERT_EQ(table.size(), got.size());
  for (const RandomTensor& t : table) {
    ASSERT_EQ(got.count(t.name), 1u) << t.name;
    EXPECT_EQ(got.at(t.name), (Header{t.dtype, t.shape})) << t.name;
  }
  // config.json is the input byte for byte; the index names every tensor's shard.
  EXPECT_EQ(test::read_file(out + "/config.json"), test::read_file(real + "/config.json"));
  const json index = json::parse(test::read_file(out + "/model.safetensors.index.json"));
  ASSERT_EQ(index["weight_map"].size(), got.size());
  uint64_t total = 0;
  for (const auto& [name, file] : index["weight_map"].items()) {
    SafetensorsFile shard(out + "/" + file.get<std::string>());
    EXPECT_TRUE(shard.contains(name)) << name << " not in " << file;
    total += shard.get(name).n_bytes;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
}

INSTANTIATE_TEST_SUITE_P(Golden, MakeRandomTable,
                         ::testing::Values("tiny-v3", "tiny-v3-story", "tiny-v3-chat", "tiny-v2",
                                           "tiny-v2-lite"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The benchmark slice: one dense and one MoE layer of real DeepSeek-V3 sizes, ~6 GB.
TEST(MakeRandom, BenchSliceConfigIsTwoFullSizeV3Layers) {
  const std::string path = std::string(DSINFER_TEST_DATA) + "/../../configs/bench_v3_slice.json";
  const std::string text = test::read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  const ModelConfig c = parse_config_json(text, path);
  EXPECT_EQ(c.dim, 7168);
  EXPECT_EQ(c.n_heads, 128);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.inter_dim, 18432);
  EXPECT_EQ(c.moe_inter_dim, 2048);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_dense_layers, 1);
  EXPECT_EQ(c.n_routed_experts, 32);
  EXPECT_EQ(c.n_activated_experts, 8);
  EXPECT_EQ(c.n_expert_groups, 8);
  EXPECT_EQ(c.n_limited_groups, 4);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.dtype, WeightDType::kFP8);
  EXPECT_EQ(c.original_seq_len, 4096);
  EXPECT_DOUBLE_EQ(c.rope_factor, 40);
  // The same keys as a real V3 config (the tiny-v3 golden is one, shrunk).
  const json bench = json::parse(text), v3 = json::parse(test::read_file(golden_config("tiny-v3")));
  for (const auto& [key, value] : v3.items()) EXPECT_TRUE(bench.contains(key)) << key;
  for (const auto& [key, value] : bench.items()) EXPECT_TRUE(v3.contains(key)) << key;
  EXPECT_EQ(bench["rope_scaling"], v3["rope_scaling"]);
  EXPECT_EQ(bench["quantization_config"], v3["quantization_config"]);
  EXPECT_EQ(bench["num_nextn_predict_layers"], 0);

  const auto table = random_checkpoint_tensors(text, path);
  uint64_t total = 0;
  for (const RandomTensor& t : table) total += t.n_bytes();
  EXPECT_GT(total, 5.5e9);
  EXPECT_LT(total, 6.5e9);
  std::printf("[ bench ] bench_v3_slice: %zu tensors, %.2f GB\n", table.size(), total / 1e9);
}

// ---- determinism
// ---------------------------------------------------------------------------------

TEST(MakeRandom, DeterministicInSeedWhateverTheShardSplit) {
  const std::string config = golden_config("tiny-v3");
  const std::string a = test::scratch_dir("a"), b = test::scratch_dir("b"),
                    split = test::scratch_dir("split"), other = test::scratch_dir("other");
  ASSERT_EQ(make_random(config, a, "--seed 7").exit_code, 0);
  ASSERT_EQ(make_random(config, b, "--seed 7").exit_code, 0);
  auto r = make_random(config, split, "--seed 7 --shard-gb 0.004");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(make_random(config, other, "--seed 8").exit_code, 0);

  // Same seed: the same files, byte for byte.
  const auto files = shard_files(a);
  ASSERT_EQ(files.size(), shard_files(b).size());
  for (const std::string& f : files) {
    const std::string name = fs::path(f).filename().string();
    EXPECT_TRUE(test::read_file(f) == test::read_file(b + "/" + name))
        << name << " differs between two runs";
  }
  EXPECT_EQ(test::read_file(a + "/model.safetensors.index.json"),
            test::read_file(b + "/model.safetensors.index.json"));

  // Smaller shards: several files, the same bytes per tensor.
  const auto whole = bytes_of(a), pieces = bytes_of(split), reseeded = bytes_of(other);
  EXPECT_GT(shard_files(split).size(), files.size() + 2);
  ASSERT_EQ(pieces.size(), whole.size());
  for (const auto& [name, bytes] : whole)
    EXPECT_TRUE(pieces.at(name) == bytes) << name << " depends on the split";

  // Another seed: every random tensor changes; the norms (all ones) do not.
  const auto table = random_checkpoint_tensors(test::read_file(config), config);
  int random = 0;
  for (const RandomTensor& t : table) {
    if (t.init == RandomInit::kOnes) {
      EXPECT_TRUE(reseeded.at(t.name) == whole.at(t.name)) << t.name;
      continue;
    }
    ++random;
    const std::string &x = whole.at(t.name), &y = reseeded.at(t.name);
    const size_t es = dtype_size(t.dtype), n = x.size() / es;
    size_t same = 0;  // whole elements (the exponent bytes of scales rarely change)
    for (size_t i = 0; i < n; ++i) same += x.compare(i * es, es, y, i * es, es) == 0;
    EXPECT_LT(same, n / 2) << t.name << ": " << same << " of " << n
                           << " elements unchanged by the seed";
  }
  EXPECT_GT(random, 20);

  // The library agrees with the files, and pieces of any size give the same bytes.
  for (const RandomTensor& t : table) {
    if (t.n_bytes() > (1u << 20)) continue;
    std::string piecewise(t.n_bytes(), '\0');
    for (uint64_t at = 0; at < t.n_bytes(); at += 7) {
      const uint64_t n = std::min<uint64_t>(7, t.n_bytes() - at);
      random_tensor_bytes(t, 7, at, n, reinterpret_cast<uint8_t*>(piecewise.data()) + at);
    }
    EXPECT_TRUE(piecewise == whole.at(t.name)) << t.name << " read in 7-byte pieces";
  }
}

// ---- the values
// ----------------------------------------------------------------------------------

struct Moments {
  double mean = 0, std = 0;
};
Moments moments(const std::vector<double>& x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  for (double v : x) m.std += (v - m.mean) * (v - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(x.size()));
  return m;
}

// The weight's values as doubles: fp8 codes times their 128x128 block scale, or bf16.
std::vector<double> dequantized(const SafetensorsFile& file, const TensorView& w) {
  std::vector<double> out(static_cast<size_t>(w.numel()));
  if (w.dtype == DType::kBF16) {
    const auto* p = reinterpret_cast<const uint16_t*>(w.data);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(p[i]);
    return out;
  }
  EXPECT_EQ(w.dtype, DType::kF8E4M3) << w.name;
  const std::string scale_name =
      w.name.substr(0, w.name.size() - std::string("weight").size()) + "weight_scale_inv";
  const TensorView& s = file.get(scale_name);
  const int64_t rows = w.dim(0), cols = w.dim(1);
  EXPECT_EQ(s.shape, (std::vector<int64_t>{ceil_div(rows, 128), ceil_div(cols, 128)}));
  const auto* scale = reinterpret_cast<const float*>(s.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t code = w.data[r * cols + c];
      EXPECT_NE(code & 0x7f, 0x7f) << w.name << " holds a NaN code";
      out[r * cols + c] = fp8_e4m3_to_f32(code) * scale[(r / 128) * s.dim(1) + c / 128];
    }
  return out;
}

void expect_sane_values(const std::string& dir) {
  int linears = 0;
  for (const std::string& path : shard_files(dir)) {
    SafetensorsFile file(path);
    for (const auto& [name, view] : file.tensors()) {
      SCOPED_TRACE(name);
      if (name.ends_with("weight_scale_inv")) {
        const auto* s = reinterpret_cast<const float*>(view.data);
        for (int64_t i = 0; i < view.numel(); ++i)
          ASSERT_TRUE(std::isfinite(s[i]) && s[i] > 0) << s[i];
        continue;
      }
      if (name.ends_with("norm.weight")) {  // RMSNorm weights: 1
        ASSERT_EQ(view.dtype, DType::kBF16);
        const auto* p = reinterpret_cast<const uint16_t*>(view.data);
        for (int64_t i = 0; i < view.numel(); ++i) ASSERT_EQ(bf16_to_f32(p[i]), 1.0f);
        continue;
      }
      if (name.ends_with("e_score_correction_bias")) {
        ASSERT_EQ(view.dtype, DType::kF32);
        const auto* p = reinterpret_cast<const float*>(view.data);
        for (int64_t i = 0; i < view.numel(); ++i) EXPECT_LT(std::fabs(p[i]), 0.1f);
        continue;
      }
      ASSERT_EQ(view.shape.size(), 2u);
      const Moments m = moments(dequantized(file, view));
      // Embeddings std 1; everything else (linears, heads, router) 1/sqrt(fan_in).
      const bool embedding = name.ends_with("embed_tokens.weight");
      const double want = embedding ? 1.0 : 1.0 / std::sqrt(static_cast<double>(view.dim(1)));
      EXPECT_GT(m.std, want / 1.25) << "std " << m.std << ", want ~" << want;
      EXPECT_LT(m.std, want * 1.25) << "std " << m.std << ", want ~" << want;
      EXPECT_LT(std::fabs(m.mean), 0.1 * want) << "mean " << m.mean;
      ++linears;
    }
  }
  EXPECT_GT(linears, 10);
}

TEST(MakeRandom, Fp8WeightsHaveStdOneOverSqrtFanIn) {
  const std::string out = test::scratch_dir("hf");
  auto r = make_random(golden_config("tiny-v3"), out, "--seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_sane_values(out);
}

TEST(MakeRandom, Bf16WeightsHaveStdOneOverSqrtFanIn) {
  const std::string out = test::scratch_dir("hf");
  auto r = make_random(golden_config("tiny-v2-lite"), out, "--seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_sane_values(out);
}

// ---- convert and run
// -----------------------------------------------------------------------------

double mean_nll(const test::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return NAN;
  const json out = json::parse(r.out);
  for (const auto& row : out["nll"])
    for (const auto& v : row) EXPECT_TRUE(std::isfinite(v.get<double>()));
  return out["mean_nll"].get<double>();
}

// The real V3 architecture and tokenizer (tiny-v3-story's config: vocab 129280, fp8, MTP layer).
// The MTP layer's embedding and head are bitwise copies of the main ones, as in the real
// checkpoints (so convert --keep-mtp stores them once).
TEST(MakeRandom, TheMtpCopiesAreTheMainTensorsBits) {
  const std::string hf = test::scratch_dir("hf");
  ASSERT_EQ(make_random(golden_config("tiny-v3-story"), hf, "--seed 3").exit_code, 0);
  const auto bytes = bytes_of(hf);
  ASSERT_TRUE(bytes.count("model.layers.4.embed_tokens.weight") &&
              bytes.count("model.layers.4.shared_head.head.weight"));
  EXPECT_TRUE(bytes.at("model.layers.4.embed_tokens.weight") ==
              bytes.at("model.embed_tokens.weight"));
  EXPECT_TRUE(bytes.at("model.layers.4.shared_head.head.weight") == bytes.at("lm_head.weight"));
  EXPECT_FALSE(bytes.at("model.layers.4.eh_proj.weight").empty());
}

TEST(MakeRandom, ConvertsAndRunsAtOneAndTwoRanks) {
  const std::string config = golden_config("tiny-v3-story");
  const std::string hf = test::scratch_dir("hf"), mp1 = test::scratch_dir("mp1"),
                    mp2 = test::scratch_dir("mp2");
  auto r =
      make_random(config, hf, "--seed 1 --tokenizer-from " + data_path("tokenizer/deepseek-v3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(hf + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(hf + "/tokenizer_config.json"));
  for (const auto& [dir, ranks] : {std::pair{mp1, 1}, std::pair{mp2, 2}}) {
    r = run_dsinfer("-q convert --hf-ckpt-path " + hf + " --save-path " + dir +
                    " --n-experts 8 --model-parallel " + std::to_string(ranks));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir + "/tokenizer.json")) << "convert carries the tokenizer on";
  }

  const std::string text = test::scratch_dir("text") + "/text.txt";
  test::write_file(text, "The old man walked slowly down the road to the house. He was tired.\n");
  const std::string ppl = "perplexity --ckpt-path ";
  const double nll1 =
      mean_nll(run_dsinfer("--threads 2 " + ppl + mp1 + " --input-file " + text + " --json"));
  // A random model is about as good as a uniform guess over the vocabulary (ln 129280 = 11.77).
  const double uniform = std::log(129280.0);
  EXPECT_GT(nll1, uniform - 2) << "a random model should not predict text";
  EXPECT_LT(nll1, uniform + 4) << "the logits of a random model should stay tame";

  r = run_dsinfer("--threads 2 generate --ckpt-path " + mp1 + " --input-file " +
                  data_path("golden/tiny-v3-story/prompts.txt") +
                  " --max-new-tokens 4 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;

  std::string backend;
  for (const char* b : {"mpi", "gloo"})
    if (backend.empty() && test::backend_unavailable(b).empty()) backend = b;
  if (backend.empty())
    GTEST_SKIP() << "no multi-process backend: " << test::backend_unavailable("mpi");
  const double nll2 =
      mean_nll(test::run_ranks(backend, 2, ppl + mp2 + " --input-file " + text + " --json"));
  EXPECT_NEAR(nll2, nll1, 1e-3 * nll1) << "two ranks (" << backend << ") disagree with one";
  std::printf(
      "[ random ] tiny-v3-story config, seed 1: mean NLL %.4f at 1 rank, %.4f at 2 (%s); uniform "
      "%.4f\n",
      nll1, nll2, backend.c_str(), uniform);
}

// ---- bad input
// -----------------------------------------------------------------------------------

std::string edited_config(const std::string& name, const std::function<void(json&)>& edit) {
  json j = json::parse(test::read_file(golden_config("tiny-v3")));
  edit(j);
  const std::string path = test::scratch_dir("config-" + name) + "/config.json";
  test::write_file(path, j.dump(2));
  return path;
}

void expect_fails_with(const test::CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  for (const std::string& n : needles) EXPECT_CONTAINS(r.err, n);
}

TEST(MakeRandom, BadInputFailsNamingTheCulprit) {
  const std::string out = test::scratch_dir("out") + "/hf";
  for (const char* key :
       {"hidden_size", "kv_lora_rank", "intermediate_size", "moe_intermediate_size",
        "n_routed_experts", "first_k_dense_replace", "q_lora_rank"}) {
    SCOPED_TRACE(key);
    const std::string config = edited_config(key, [&](json& j) { j.erase(key); });
    expect_fails_with(make_random(config, out), {config, key});
  }
  std::string config = edited_config("freq", [](json& j) { j["moe_layer_freq"] = 2; });
  expect_fails_with(make_random(config, out), {config, "moe_layer_freq 2"});
  config = edited_config("block", [](json& j) {
    j["quantization_config"]["weight_block_size"] = {64, 64};
  });
  expect_fails_with(make_random(config, out), {config, "weight_block_size"});
  config = edited_config("size", [](json& j) { j["qk_rope_head_dim"] = 15; });
  expect_fails_with(make_random(config, out), {"qk_rope_head_dim"});
  test::write_file(config, "{\"hidden_size\": ");
  expect_fails_with(make_random(config, out), {config, "not valid JSON"});
  expect_fails_with(make_random("/nonexistent/config.json", out), {"/nonexistent/config.json"});
  EXPECT_FALSE(fs::exists(out)) << "nothing written for a bad config";

  // An --out that cannot be created (below a regular file), and one that is a file.
  const std::string file = test::scratch_dir("file") + "/plain";
  test::write_file(file, "x");
  expect_fails_with(make_random(golden_config("tiny-v3"), file + "/hf"), {file + "/hf"});
  expect_fails_with(make_random(golden_config("tiny-v3"), file), {file, "not a directory"});
  expect_fails_with(make_random(golden_config("tiny-v3"), out, "--shard-gb 0"), {"--shard-gb"});
  expect_fails_with(make_random(golden_config("tiny-v3"), out, "--tokenizer-from /nonexistent"),
                    {"/nonexistent"});
}

}  // namespace
}  // namespace dsinfer::make_random_test
