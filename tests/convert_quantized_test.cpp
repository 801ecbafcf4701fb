// convert --experts-int4 / --int8 and the loader's checks of what a shard holds: the quantized
// tensors are round-to-nearest of the exactly dequantized source (recomputed here from the HF
// files), the shards and the copied config.json say what they hold, and a shard whose tensors
// disagree with its metadata, or ranks of different converts, are one clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "kernels/group_quant.h"
#include "test_support.h"

namespace dsinfer::convert_quantized_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Every routed expert's weight in the int4 shard is quantize_row of its fp8 source x block
// scale, byte for byte; everything else is what the default convert writes, byte for byte.
TEST(ConvertQuantized, Int4ExpertsAreRoundToNearestOfTheDequantizedSource) {
  const std::string exact = test::convert_golden("tiny-v3-story", 2);
  const std::string int4 = test::convert_golden("tiny-v3-story", 2, false, false, "--experts-int4");
  const CheckpointDir hf(test::data_path("golden/tiny-v3-story/hf"));
  int experts_checked = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const SafetensorsFile q(int4 + "/model" + std::to_string(rank) + "-mp2.safetensors");
    const SafetensorsFile e(exact + "/model" + std::to_string(rank) + "-mp2.safetensors");
    EXPECT_EQ(q.metadata().at("dsinfer.experts"), "int4-g128");
    EXPECT_EQ(e.metadata().count("dsinfer.experts"), 0u);
    for (const auto& [name, t] : e.tensors()) {
      const bool expert = name.find(".ffn.experts.") != std::string::npos;
      if (!expert) {
        ASSERT_TRUE(q.contains(name)) << name;
        const TensorView& u = q.get(name);
        EXPECT_EQ(u.dtype, t.dtype) << name;
        EXPECT_EQ(u.shape, t.shape) << name;
        EXPECT_EQ(0, std::memcmp(u.data, t.data, t.n_bytes)) << name << " changed";
        continue;
      }
      if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) continue;
      // layers.L.ffn.experts.J.wK.weight <- model.layers.L.mlp.experts.J.{gate,down,up}_proj.weight
      const std::string stem = name.substr(0, name.size() - 7);
      const TensorView& w = q.get(name);
      const TensorView& s = q.get(stem + ".scale");
      const int64_t rows = t.shape[0], cols = t.shape[1];
      ASSERT_EQ(w.dtype, kInt4Storage);
      ASSERT_EQ(w.shape, (std::vector<int64_t>{rows, quant_row_bytes(QuantFormat::kInt4, cols)}));
      ASSERT_EQ(s.dtype, DType::kF16);
      ASSERT_EQ(s.shape, (std::vector<int64_t>{rows, quant_groups(cols)}));
      const TensorView& fp8_scale = e.get(stem + ".scale");
      std::vector<float> row(static_cast<size_t>(cols));
      std::vector<uint8_t> bytes(static_cast<size_t>(quant_row_bytes(QuantFormat::kInt4, cols)));
      std::vector<uint16_t> scales(static_cast<size_t>(quant_groups(cols)));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c)
          row[c] = fp8_e4m3_to_f32(t.data[r * cols + c]) *
                   reinterpret_cast<const float*>(
                       fp8_scale.data)[(r / 128) * ceil_div(cols, 128) + c / 128];
        quantize_row(QuantFormat::kInt4, row.data(), cols, bytes.data(), scales.data());
        ASSERT_EQ(0, std::memcmp(bytes.data(), w.data + r * static_cast<int64_t>(bytes.size()),
                                 bytes.size()))
            << name << " row " << r;
        ASSERT_EQ(0,
                  std::memcmp(scales.data(), s.data + r * static_cast<int64_t>(scales.size()) * 2,
                              scales.size() * 2))
            << name << " row " << r;
      }
      ++experts_checked;
    }
  }
  EXPECT_EQ(experts_checked, 3 * 8 * 3);  // 3 MoE layers x 8 experts x w1/w2/w3, over both ranks
  const json config = json::parse(test::read_file(int4 + "/config.json"));
  EXPECT_EQ(config["dsinfer_quantization"]["routed_experts"], "int4");
  EXPECT_EQ(config["dsinfer_quantization"]["group_size"], 128);
  EXPECT_FALSE(
      json::parse(test::read_file(exact + "/config.json")).contains("dsinfer_quantization"));
}

TEST(ConvertQuantized, Int8OfAnFp8CheckpointIsRefused) {
  const std::string out = test::scratch_dir("int8-of-fp8");
  const auto r =
      test::run_dsinfer("convert --hf-ckpt-path " + test::data_path("golden/tiny-v3-story/hf") +
                        " --save-path " + out + " --n-experts 8 --model-parallel 1 --int8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is fp8 already"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out + "/model0-mp1.safetensors"));
}

// A copy of `from` with other metadata (the tensors as they are).
void rewrite_metadata(const std::string& from, const std::string& to,
                      const std::map<std::string, std::string>& metadata) {
  const SafetensorsFile in(from);
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, t] : in.tensors()) entries.push_back({name, t.dtype, t.shape});
  SafetensorsWriter out(to, entries, metadata);
  for (const auto& [name, t] : in.tensors()) out.write(name, t.data, t.n_bytes);
  out.finish();
}

// perplexity on a copy of `ckpt` whose shard carries `metadata` must fail naming `message`.
void expect_refused(const std::string& ckpt, const std::string& copy_name,
                    const std::map<std::string, std::string>& metadata,
                    const std::string& message) {
  const std::string copy = test::scratch_dir(copy_name);
  fs::copy_file(ckpt + "/config.json", copy + "/config.json", fs::copy_options::overwrite_existing);
  rewrite_metadata(ckpt + "/model0-mp1.safetensors", copy + "/model0-mp1.safetensors", metadata);
  const auto r = test::run_dsinfer("perplexity --ckpt-path " + copy + " --case " +
                                   test::data_path("golden/tiny-v3-story/ppl-mp1-fp32.json"));
  EXPECT_NE(r.exit_code, 0) << copy_name;
  EXPECT_NE(r.err.find(message), std::string::npos) << copy_name << ": " << r.err;
}

TEST(ConvertQuantized, TheLoaderHoldsEveryTensorToTheShardsMetadata) {
  const std::string int4 = test::convert_golden("tiny-v3-story", 1, false, false, "--experts-int4");
  const std::string exact = test::convert_golden("tiny-v3-story");
  // int4 tensors in a shard that does not say so
  expect_refused(int4, "int4-no-metadata", {}, "has dtype U8 (an int4 / int8 weight");
  // a shard that says int4 but holds fp8 experts
  expect_refused(exact, "fp8-says-int4", {{"dsinfer.experts", "int4-g128"}},
                 "has dtype F8_E4M3 but the shard's metadata says int4 routed experts");
  // a format this version does not know
  expect_refused(exact, "int3-shard", {{"dsinfer.experts", "int3-g64"}},
                 "is not a weight format this dsinfer knows");
}

// perplexity --reference-ckpt-path: a path that is no checkpoint directory is named before anything
// loads.
TEST(ConvertQuantized, ABadReferenceCheckpointIsNamed) {
  const std::string int4 = test::convert_golden("tiny-v3-story", 1, false, false, "--experts-int4");
  const std::string file = test::scratch_dir("ref") + "/not-a-dir";
  test::write_file(file, "x");
  const auto r =
      test::run_dsinfer("perplexity --ckpt-path " + int4 + " --reference-ckpt-path " + file +
                        " --case " + test::data_path("golden/tiny-v3-story/ppl-mp1-fp32.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--reference-ckpt-path " + file + " is not a directory"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("loaded"), std::string::npos) << "checked after loading: " << r.err;
}

// Rank 0's shard from an int4 convert, rank 1's from the default one: both ranks stop with the
// same message naming what each holds.
TEST(ConvertQuantized, RanksOfDifferentConvertsAreOneClearError) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  const std::string int4 = test::convert_golden("tiny-v3-story", 2, false, false, "--experts-int4");
  const std::string exact = test::convert_golden("tiny-v3-story", 2);
  const std::string mixed = test::scratch_dir("mixed-mp2");
  fs::copy_file(int4 + "/config.json", mixed + "/config.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(int4 + "/model0-mp2.safetensors", mixed + "/model0-mp2.safetensors",
                fs::copy_options::overwrite_existing);
  fs::copy_file(exact + "/model1-mp2.safetensors", mixed + "/model1-mp2.safetensors",
                fs::copy_options::overwrite_existing);
  const auto r = test::run_ranks("gloo", 2,
                                 "perplexity --ckpt-path " + mixed + " --case " +
                                     test::data_path("golden/tiny-v3-story/ppl-mp1-fp32.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(
      r.err.find(
          "rank 0's shard holds int4 routed experts, every other tensor as converted, rank 1's the "
          "checkpoint's own formats"),
      std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dsinfer::convert_quantized_test
