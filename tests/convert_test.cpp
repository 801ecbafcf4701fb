// convert and fp8-cast-bf16 on bad input, through the binary: each fails with a non-zero exit
// and one clear message naming the culprit, and leaves no output shard behind. Plus the flags,
// --help, and the small behaviours the goldens do not cover (token files, no config.json).
#include "convert/convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::convert_test {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::read_file;
using test::run_dsinfer;
using test::scratch_dir;
using test::write_file;

std::string golden_hf(const std::string& model) { return data_path("golden/" + model + "/hf"); }

// A writable copy of a golden HF directory.
std::string copy_hf(const std::string& model, const std::string& name = "hf") {
  const std::string dir = scratch_dir(name);
  fs::copy(golden_hf(model), dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dir;
}

// A copy whose config.json does not say n_routed_experts (convert then cannot compare --n-experts
// with it up front, and the per-tensor checks are what stops a wrong count).
std::string copy_hf_without_expert_count(const std::string& model) {
  const std::string dir = copy_hf(model, "hf-no-expert-count");
  nlohmann::json config = nlohmann::json::parse(read_file(dir + "/config.json"));
  config.erase("n_routed_experts");
  write_file(dir + "/config.json", config.dump(2));
  return dir;
}

test::CommandResult convert(const std::string& hf, const std::string& out, int n_experts, int mp) {
  return run_dsinfer("convert --hf-ckpt-path " + hf + " --save-path " + out + " --n-experts " +
                     std::to_string(n_experts) + " --model-parallel " + std::to_string(mp));
}

// No shard (finished or partial) was left in `dir`.
void expect_no_shards(const std::string& dir) {
  if (!fs::exists(dir)) return;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".safetensors"), std::string::npos) << "left behind: " << name;
  }
}

// The command failed, and its stderr holds every fragment, in this order.
::testing::AssertionResult fails_with(const test::CommandResult& result,
                                      std::initializer_list<std::string> fragments) {
  if (result.exit_code == 0)
    return ::testing::AssertionFailure() << "exit status 0; stderr:\n" << result.err;
  size_t at = 0;
  for (const std::string& fragment : fragments) {
    const size_t found = result.err.find(fragment, at);
    if (found == std::string::npos)
      return ::testing::AssertionFailure() << "stderr lacks \"" << fragment << "\" (in order):\n"
                                           << result.err;
    at = found + fragment.size();
  }
  return ::testing::AssertionSuccess();
}

TEST(ConvertCli, HelpMentionsEveryFlag) {
  const auto result = run_dsinfer("convert --help");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char* flag : {"--hf-ckpt-path", "--save-path", "--n-experts", "--model-parallel"})
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag << " missing from:\n" << result.out;
}

TEST(Fp8CastCli, HelpMentionsEveryFlag) {
  const auto result = run_dsinfer("fp8-cast-bf16 --help");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char* flag : {"--input-fp8-hf-path", "--output-bf16-hf-path"})
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag << " missing from:\n" << result.out;
}

TEST(ConvertCli, EveryFlagIsRequired) {
  const std::string hf = golden_hf("tiny-v2-lite"), out = scratch_dir("out");
  const std::string all[4] = {"--hf-ckpt-path " + hf, "--save-path " + out, "--n-experts 8",
                              "--model-parallel 1"};
  for (int missing = 0; missing < 4; ++missing) {
    std::string args = "convert";
    for (int i = 0; i < 4; ++i)
      if (i != missing) args += " " + all[i];
    const auto result = run_dsinfer(args);
    const std::string flag = all[missing].substr(0, all[missing].find(' '));
    EXPECT_TRUE(fails_with(result, {flag}));
    EXPECT_EQ(result.exit_code, 1) << "a bad command line is status 1, as every other error";
  }
  // the same for other subcommands and kinds of parse error
  for (const char* bad : {"generate --ckpt-path x --max-new-tokens many", "serve --no-such-flag",
                          "bench --ckpt-path x --mtp sometimes", "no-such-command"}) {
    const auto result = run_dsinfer(bad);
    EXPECT_EQ(result.exit_code, 1) << bad << ": " << result.err;
    EXPECT_FALSE(result.err.empty()) << bad;
  }
  EXPECT_TRUE(fails_with(run_dsinfer("convert --hf-ckpt-path " + hf + " --save-path " + out +
                                     " --n-experts eight --model-parallel 1"),
                         {"--n-experts"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, MissingCheckpointDirectory) {
  const std::string missing = scratch_dir("x") + "/no-such-checkpoint";
  const std::string out = scratch_dir("out") + "/shards";
  EXPECT_TRUE(
      fails_with(convert(missing, out, 8, 1), {"no-such-checkpoint", " is not a directory"}));
  EXPECT_FALSE(fs::exists(out));
}

TEST(ConvertErrors, ExpertsNotDivisibleByModelParallel) {
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(fails_with(convert(golden_hf("tiny-v3"), out, 8, 3),
                         {"--n-experts 8 is not divisible by --model-parallel 3"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, ModelParallelDoesNotDivideADimension) {
  // 8 experts split 4 ways is fine, but tiny-v3's fp8 scales have dims like 6 and 2 rows
  // (q_b_proj: 768 rows -> 6 blocks; a shared expert's 256 rows -> 2 blocks): the reference
  // asserts, we name the tensor, its shape and the dim.
  const std::string out = scratch_dir("out");
  const auto result = convert(golden_hf("tiny-v3"), out, 8, 4);
  EXPECT_TRUE(fails_with(
      result, {"tensor model.layers.", "_scale_inv [", "] (", ".safetensors): dimension ",
               ") is not divisible by --model-parallel 4"}));
  expect_no_shards(out);

  // 3 ranks and 9 experts: the expert count divides, the embedding's 2048 rows do not.
  const auto result3 = convert(copy_hf_without_expert_count("tiny-v3"), out, 9, 3);
  EXPECT_TRUE(fails_with(result3, {"tensor model.", "is not divisible by --model-parallel 3"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, ExpertIndexBeyondNExperts) {
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(fails_with(convert(copy_hf_without_expert_count("tiny-v3"), out, 4, 2),
                         {"tensor model.layers.", ".mlp.experts.", "belongs to routed expert ",
                          ", but --n-experts is 4"}));
  expect_no_shards(out);
  // too many: the last rank would get no experts at all
  EXPECT_TRUE(fails_with(
      convert(copy_hf_without_expert_count("tiny-v3"), out, 16, 2),
      {"--n-experts 16 but the checkpoint's tensors hold routed experts 0..7 (8 experts)"}));
  expect_no_shards(out);
  // the config's count, when it has one, is checked first
  EXPECT_TRUE(fails_with(convert(golden_hf("tiny-v3"), out, 4, 2),
                         {"--n-experts 4 but ", "tiny-v3/hf/config.json says n_routed_experts 8"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, TruncatedSafetensorsFile) {
  const std::string hf = copy_hf("tiny-v3");
  const std::string victim = hf + "/model-00002-of-00002.safetensors";
  fs::resize_file(victim, fs::file_size(victim) / 2);
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(
      fails_with(convert(hf, out, 8, 1), {"model-00002-of-00002.safetensors", "truncated"}));
  expect_no_shards(out);

  // Cut inside the header too.
  fs::resize_file(victim, 100);
  EXPECT_TRUE(
      fails_with(convert(hf, out, 8, 1), {"model-00002-of-00002.safetensors", "truncated"}));
  expect_no_shards(out);
}

// Sets byte `k` of tensor `name`'s data in a safetensors file in place.
void patch_tensor_byte(const std::string& path, const std::string& name, size_t k, char value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header = 0;
  f.read(reinterpret_cast<char*>(&header), 8);
  std::string text(header, '\0');
  f.read(text.data(), static_cast<std::streamsize>(header));
  const size_t begin = nlohmann::json::parse(text).at(name).at("data_offsets").at(0);
  f.seekp(static_cast<std::streamoff>(8 + header + begin + k));
  f.write(&value, 1);
}

// fp8 e4m3fn's NaN codes (0x7f, 0xff) decode as NaN on the scalar path but as finite numbers in
// the vector kernels: a damaged checkpoint answered differently per machine. convert refuses it.
TEST(ConvertErrors, AnFp8NanCodeIsRefusedNamingTheElement) {
  const std::string hf = copy_hf("tiny-v3");
  std::string file, name;
  for (const auto& entry : fs::directory_iterator(hf)) {
    if (entry.path().extension() != ".safetensors") continue;
    SafetensorsFile f(entry.path().string());
    for (const auto& [n, t] : f.tensors())
      if (name.empty() && t.dtype == DType::kF8E4M3 && t.shape.size() == 2 && t.shape[1] > 5)
        name = n, file = entry.path().string();
  }
  ASSERT_FALSE(name.empty());
  size_t cols = 0;
  {
    SafetensorsFile f(file);
    cols = static_cast<size_t>(f.get(name).shape[1]);
  }
  patch_tensor_byte(file, name, 2 * cols + 5, '\xff');
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(fails_with(convert(hf, out, 8, 1),
                         {"tensor " + name + " holds a NaN code (0x7f or 0xff) at element [2, 5]",
                          "the checkpoint is damaged"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, IndexNamesAMissingShard) {
  const std::string hf = copy_hf("tiny-v3");
  fs::remove(hf + "/model-00002-of-00002.safetensors");
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(fails_with(
      convert(hf, out, 8, 1),
      {"model.safetensors.index.json names model-00002-of-00002.safetensors, which is missing"}));
  expect_no_shards(out);
}

TEST(ConvertErrors, NoConfigMeansOnlyLayer61IsSkipped) {
  // Without config.json we fall back to convert.py's literal rule, so tiny-v3's MTP layer 3 is
  // converted and its "enorm" has no entry in the name table, as the reference's assert.
  const std::string hf = copy_hf("tiny-v3");
  fs::remove(hf + "/config.json");
  const std::string out = scratch_dir("out");
  EXPECT_TRUE(
      fails_with(convert(hf, out, 8, 1), {"tensor model.layers.3.", "is not in the name table"}));
  expect_no_shards(out);
}

TEST(ConvertFiles, CopiesTokenFilesAndWorksWithoutConfig) {
  // tiny-v2-lite has no MTP layer, so without config.json it converts as with it.
  const std::string hf = copy_hf("tiny-v2-lite");
  fs::remove(hf + "/config.json");
  write_file(hf + "/tokenizer.json", "{\"model\": {}}");
  write_file(hf + "/tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
  const std::string out = scratch_dir("out") + "/a/b";
  const auto result = convert(hf, out, 8, 2);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("layer 61"), std::string::npos) << result.err;
  EXPECT_EQ(read_file(out + "/tokenizer.json"), "{\"model\": {}}");
  EXPECT_EQ(read_file(out + "/tokenizer_config.json"), "{\"bos_token\": \"<s>\"}");
  EXPECT_FALSE(fs::exists(out + "/config.json"));
  EXPECT_FALSE(fs::exists(out + "/inference_config.json"));
  SafetensorsFile input(hf + "/model-00001-of-00002.safetensors");
  const int64_t vocab = input.get("model.embed_tokens.weight").dim(0);
  for (int rank = 0; rank < 2; ++rank) {
    SafetensorsFile shard(out + "/model" + std::to_string(rank) + "-mp2.safetensors");
    ASSERT_TRUE(shard.contains("embed.weight"));
    EXPECT_EQ(shard.get("embed.weight").dim(0), vocab / 2);
  }
}

TEST(ConvertFiles, RoutedExpertsGoWholeToTheirRank) {
  const std::string out = scratch_dir("out");
  const auto result = convert(golden_hf("tiny-v3-chat"), out, 8, 2);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int rank = 0; rank < 2; ++rank) {
    SafetensorsFile shard(out + "/model" + std::to_string(rank) + "-mp2.safetensors");
    for (int expert = 0; expert < 8; ++expert) {
      const std::string name = "layers.1.ffn.experts." + std::to_string(expert) + ".w1.weight";
      EXPECT_EQ(shard.contains(name), expert / 4 == rank) << name << " on rank " << rank;
    }
  }
}

// The chunked paths (gathered column slices, pieces of direct copies, dequantized row blocks
// that do not line up with 128-row blocks) give the same files as whole-tensor chunks. The
// goldens alone never take them: their tensors are far below the 64 MiB default chunk.
TEST(ConvertChunks, TinyChunksWriteTheSameFiles) {
  const std::string hf = golden_hf("tiny-v3");
  const std::string whole = scratch_dir("whole"), tiny = scratch_dir("tiny");
  ASSERT_EQ(convert(hf, whole + "/mp2", 8, 2).exit_code, 0);
  ASSERT_EQ(run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + hf + " --output-bf16-hf-path " +
                        whole + "/bf16")
                .exit_code,
            0);

  const size_t saved = convert_detail::chunk_bytes();
  convert_detail::set_chunk_bytes(2000);
  convert_checkpoint({hf, tiny + "/mp2", 8, 2});
  fp8_cast_bf16(hf, tiny + "/bf16");
  convert_detail::set_chunk_bytes(saved);

  size_t compared = 0;
  for (const char* sub : {"/mp2", "/bf16"}) {
    for (const auto& entry : fs::directory_iterator(whole + sub)) {
      const std::string name = entry.path().filename().string();
      EXPECT_TRUE(read_file(entry.path().string()) == read_file(tiny + sub + "/" + name))
          << sub << "/" << name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3u + 3u);  // 2 shards + config.json; 2 files + index
}

TEST(Fp8CastErrors, MissingInputDirectory) {
  const std::string missing = scratch_dir("x") + "/no-such-fp8";
  EXPECT_TRUE(fails_with(run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + missing +
                                     " --output-bf16-hf-path " + scratch_dir("out")),
                         {"no-such-fp8", " is not a directory"}));
}

TEST(Fp8CastErrors, TruncatedFileAndMissingShard) {
  const std::string hf = copy_hf("tiny-v3");
  const std::string victim = hf + "/model-00001-of-00002.safetensors";
  fs::resize_file(victim, fs::file_size(victim) - 1000);
  const std::string out = scratch_dir("out");
  const std::string args =
      "fp8-cast-bf16 --input-fp8-hf-path " + hf + " --output-bf16-hf-path " + out;
  EXPECT_TRUE(fails_with(run_dsinfer(args), {"model-00001-of-00002.safetensors", "truncated"}));
  expect_no_shards(out);
  fs::remove(victim);
  EXPECT_TRUE(
      fails_with(run_dsinfer(args), {"names model-00001-of-00002.safetensors, which is missing"}));
  expect_no_shards(out);
}

TEST(Fp8CastErrors, RefusesToWriteOverItsInput) {
  const std::string hf = copy_hf("tiny-v3");
  EXPECT_TRUE(fails_with(
      run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + hf + " --output-bf16-hf-path " + hf),
      {"is the input directory"}));
}

TEST(Fp8CastFiles, WeightWithoutScaleIsCopiedWithAWarning) {
  // Drop one scale from a copy (file and index): its weight stays fp8, as the reference does.
  const std::string hf = copy_hf("tiny-v2-lite");  // bf16 only: nothing to dequantize
  const std::string out = scratch_dir("out");
  const auto result =
      run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + hf + " --output-bf16-hf-path " + out);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("dequantized 0 fp8 weights"), std::string::npos) << result.err;

  // Now an fp8 weight without its scale: rebuild one file of tiny-v3 without that scale.
  const std::string v3 = copy_hf("tiny-v3", "v3");
  const std::string file = v3 + "/model-00001-of-00002.safetensors";
  std::string weight;
  {
    SafetensorsFile original(file);
    for (const auto& [name, view] : original.tensors())
      if (view.dtype == DType::kF8E4M3 && original.contains(name + "_scale_inv")) {
        weight = name;
        break;
      }
    ASSERT_FALSE(weight.empty());
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& [name, view] : original.tensors())
      if (name != weight + "_scale_inv") entries.push_back({name, view.dtype, view.shape});
    SafetensorsWriter writer(file + ".new", entries);
    for (const auto& [name, view] : original.tensors())
      if (name != weight + "_scale_inv") writer.write(name, view.data, view.n_bytes);
    writer.finish();
  }
  fs::rename(file + ".new", file);
  auto index = nlohmann::ordered_json::parse(read_file(v3 + "/model.safetensors.index.json"));
  ASSERT_EQ(index["weight_map"].erase(weight + "_scale_inv"), 1u);
  write_file(v3 + "/model.safetensors.index.json", index.dump(2));

  const std::string out3 = scratch_dir("out3");
  const auto r3 =
      run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + v3 + " --output-bf16-hf-path " + out3);
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_NE(
      r3.err.find("Warning: Missing scale_inv tensor for " + weight + ", skipping conversion"),
      std::string::npos)
      << r3.err;
  SafetensorsFile converted(out3 + "/model-00001-of-00002.safetensors");
  EXPECT_EQ(converted.get(weight).dtype, DType::kF8E4M3);
}

}  // namespace
}  // namespace dsinfer::convert_test
