// convert --keep-mtp: the multi-token-prediction layer goes to mtp{rank}-mp{N}.safetensors, split
// like a main layer (eh_proj whole on every rank), the model shards stay byte for byte what plain
// convert (= convert.py) writes, the embedding and head copies are dropped when bitwise equal to
// the main ones and kept (and used) when not; a checkpoint without the layer or without a
// config.json is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::convert_mtp_test {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::read_file;
using test::run_dsinfer;
using test::scratch_dir;

const std::string kStory = "tiny-v3-story";

test::CommandResult convert(const std::string& hf, const std::string& out, int mp,
                            bool keep_mtp = true) {
  return run_dsinfer("convert --hf-ckpt-path " + hf + " --save-path " + out +
                     " --n-experts 8 --model-parallel " + std::to_string(mp) +
                     (keep_mtp ? " --keep-mtp" : ""));
}

TEST(ConvertMtp, TheModuleIsSplitLikeALayerAndTheShardsStayTheReferences) {
  const std::string hf = data_path("golden/" + kStory + "/hf");
  const std::string plain = scratch_dir("plain"), kept = scratch_dir("kept");
  ASSERT_EQ(convert(hf, plain, 2, false).exit_code, 0);
  const auto r = convert(hf, kept, 2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("model.layers.4.shared_head.head.weight is bitwise equal to lm_head.weight"),
            std::string::npos)
      << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string shard = "/model" + std::to_string(rank) + "-mp2.safetensors";
    EXPECT_TRUE(read_file(plain + shard) == read_file(kept + shard)) << shard;
    EXPECT_FALSE(fs::exists(plain + "/mtp" + std::to_string(rank) + "-mp2.safetensors"));
    SafetensorsFile mtp(kept + "/mtp" + std::to_string(rank) + "-mp2.safetensors");
    EXPECT_EQ(mtp.get("mtp.eh_proj.weight").shape, (std::vector<int64_t>{64, 128}));  // whole
    // the block's tensors are cut as the last main layer's (an MoE layer like it)
    SafetensorsFile main(kept + shard);
    int compared = 0;
    for (const auto& [name, t] : mtp.tensors()) {
      const std::string as_main = "layers.3." + name.substr(4);
      if (!main.contains(as_main)) continue;
      EXPECT_EQ(t.shape, main.get(as_main).shape) << name;
      EXPECT_EQ(t.dtype, main.get(as_main).dtype) << name;
      ++compared;
    }
    EXPECT_EQ(compared, static_cast<int>(mtp.tensors().size()) -
                            4);  // all but enorm, hnorm, eh_proj, head_norm
    EXPECT_EQ(mtp.get("mtp.attn.wq_b.weight").shape,
              (std::vector<int64_t>{256, 128}));  // 8 heads x 64, halved
    EXPECT_FALSE(mtp.contains("mtp.embed.weight"));
    EXPECT_FALSE(mtp.contains("mtp.head.weight"));
    for (int e = 0; e < 8; ++e)
      EXPECT_EQ(mtp.contains("mtp.ffn.experts." + std::to_string(e) + ".w1.weight"), e / 4 == rank)
          << e;
    for (const char* name :
         {"mtp.enorm.weight", "mtp.hnorm.weight", "mtp.head_norm.weight", "mtp.ffn.gate.bias",
          "mtp.ffn.shared_experts.w2.scale", "mtp.attn_norm.weight"})
      EXPECT_TRUE(mtp.contains(name)) << name;
  }
}

// Rewrites the HF file holding `tensor` with that tensor's bytes changed.
void perturb(const std::string& hf_dir, const std::string& tensor) {
  const auto index = nlohmann::json::parse(read_file(hf_dir + "/model.safetensors.index.json"));
  const std::string path = hf_dir + "/" + index["weight_map"][tensor].get<std::string>();
  const std::string moved = path + ".old";
  fs::rename(path, moved);
  {
    SafetensorsFile in(moved);
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& [name, t] : in.tensors()) entries.push_back({name, t.dtype, t.shape});
    SafetensorsWriter out(path, entries);
    for (const auto& [name, t] : in.tensors()) {
      std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
      if (name == tensor)
        for (size_t i = 0; i < bytes.size(); i += 2) bytes[i] ^= 0x10;  // low mantissa bits of bf16
      out.write(name, bytes.data(), bytes.size());
    }
    out.finish();
  }
  fs::remove(moved);
}

// A head copy that differs is stored, split like the head, and used for the drafts: the
// transcript stays the reference's (drafts only decide how many tokens a step takes).
TEST(ConvertMtp, ACopyThatDiffersIsKeptAndOnlyChangesTheDrafts) {
  const std::string hf = scratch_dir("hf");
  fs::copy(data_path("golden/" + kStory + "/hf"), hf, fs::copy_options::recursive);
  perturb(hf, "model.layers.4.shared_head.head.weight");
  const std::string out = scratch_dir("out");
  const auto r = convert(hf, out, 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("differs from lm_head.weight; stored as mtp.head.weight"), std::string::npos)
      << r.err;
  SafetensorsFile mtp(out + "/mtp0-mp1.safetensors");
  EXPECT_EQ(mtp.get("mtp.head.weight").shape, (std::vector<int64_t>{129280, 64}));
  EXPECT_FALSE(mtp.contains("mtp.embed.weight"));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(data_path(std::string("tokenizer/deepseek-v3/") + f), out + "/" + f);
  const auto chat =
      nlohmann::json::parse(read_file(data_path("golden/" + kStory + "/chat-mp1-fp32.json")));
  const auto g =
      run_dsinfer("generate --ckpt-path " + out + " --input-file " +
                  data_path("golden/" + kStory + "/prompts.txt") + " --max-new-tokens " +
                  std::to_string(chat["max_new_tokens"].get<int>()) + " --temperature 0 --mtp on");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, chat["batch"]["stdout"].get<std::string>());
  EXPECT_NE(g.err.find("loaded " + out +
                       "/mtp0-mp1.safetensors (75 tensors: the multi-token-prediction module)"),
            std::string::npos)
      << g.err;
}

TEST(ConvertMtp, NoModuleOrNoConfigIsAClearError) {
  const std::string out = scratch_dir("out");
  auto r = convert(data_path("golden/tiny-v2-lite/hf"), out, 1);  // V2-Lite has no MTP layer
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--keep-mtp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no tensors of layer"), std::string::npos) << r.err;
  const std::string hf = scratch_dir("hf");
  fs::copy(data_path("golden/" + kStory + "/hf"), hf, fs::copy_options::recursive);
  fs::remove(hf + "/config.json");
  r = convert(hf, out, 1);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no config.json"), std::string::npos) << r.err;
  for (const auto& entry : fs::directory_iterator(out))
    EXPECT_EQ(entry.path().filename().string().find(".safetensors"), std::string::npos)
        << entry.path();
}

}  // namespace
}  // namespace dsinfer::convert_mtp_test
