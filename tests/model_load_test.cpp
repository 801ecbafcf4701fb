// Bad input to the model-running commands: every case is one clear message naming the culprit
// and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::model_load_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;
using test::run_dsinfer;

class ModelLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = data_path("golden/tiny-v3");
    ckpt_ = test::scratch_dir("ckpt");
    auto r = run_dsinfer("-q convert --hf-ckpt-path " + golden_ + "/hf --save-path " + ckpt_ +
                         " --n-experts 8 --model-parallel 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    case_ = golden_ + "/ref-mp1-fp32.json";
    out_ = test::scratch_dir("out") + "/eval";
  }

  // The reference-form config of tiny-v3 with some fields changed, written to a scratch file.
  std::string config_with(const json& changes) {
    json c = json::parse(test::read_file(golden_ + "/hf/inference_config.json"));
    c.update(changes);
    std::string path = test::scratch_dir("config") + "/config.json";
    test::write_file(path, c.dump());
    return path;
  }

  // A copy of the shard without `drop` (and with `add` as an extra f32 tensor when given), each
  // tensor's bytes passed through `patch` on the way.
  void rewrite_shard(const std::string& drop, const std::string& add = "",
                     const std::function<void(const std::string&, std::string&)>& patch = {}) {
    const std::string path = ckpt_ + "/model0-mp1.safetensors";
    const std::string tmp = ckpt_ + "/rewritten.tmp";
    {
      SafetensorsFile in(path);
      std::vector<SafetensorsWriter::Entry> entries;
      for (const auto& [name, t] : in.tensors())
        if (name != drop) entries.push_back({name, t.dtype, t.shape});
      if (!add.empty()) entries.push_back({add, DType::kF32, {4}});
      SafetensorsWriter out(tmp, entries);
      for (const auto& [name, t] : in.tensors()) {
        if (name == drop) continue;
        std::string bytes(reinterpret_cast<const char*>(t.data), t.n_bytes);
        if (patch) patch(name, bytes);
        out.write(name, bytes.data(), bytes.size());
      }
      if (!add.empty()) {
        float zeros[4] = {};
        out.write(add, zeros, sizeof zeros);
      }
      out.finish();
    }
    fs::rename(tmp, path);
  }

  test::CommandResult eval(const std::string& extra = "") {
    return run_dsinfer("eval --ckpt-path " + ckpt_ + " --case " + case_ + " --out " + out_ + " " +
                       extra);
  }

  static void expect_error(const test::CommandResult& r, const std::string& needle) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_LT(r.exit_code, 128) << "crashed: " << r.err;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr lacks \"" << needle << "\":\n"
                                                     << r.err;
  }

  std::string golden_, ckpt_, case_, out_;
};

TEST_F(ModelLoadErrors, GoodCheckpointRuns) { EXPECT_EQ(eval().exit_code, 0); }

TEST_F(ModelLoadErrors, MissingShardNamesTheWorldSize) {
  fs::rename(ckpt_ + "/model0-mp1.safetensors", ckpt_ + "/model0-mp2.safetensors");
  expect_error(eval(), "model0-mp1.safetensors");
  expect_error(eval(), "mp2");
}

TEST_F(ModelLoadErrors, MissingTensorIsNamed) {
  rewrite_shard("layers.1.attn.wkv_b.scale");
  expect_error(eval(), "layers.1.attn.wkv_b.scale");
}

// V3's sigmoid routing needs the router's selection bias: without it the model routed otherwise
// and answered other text with exit 0 (it was bound only when present).
TEST_F(ModelLoadErrors, AMissingRouterBiasIsNamed) {
  rewrite_shard("layers.2.ffn.gate.bias");
  expect_error(eval(), "missing tensor layers.2.ffn.gate.bias");
}

// A NaN or infinite norm weight or block scale made every answer empty with exit 0: refused at
// load, naming the element (the matrices are checked at convert: convert_test).
TEST_F(ModelLoadErrors, ANonFiniteSmallTensorIsRefusedNamingTheElement) {
  rewrite_shard("", "", [](const std::string& name, std::string& bytes) {
    if (name == "layers.0.attn_norm.weight") bytes[2 * 2 + 1] = '\x7f', bytes[2 * 2] = '\x80';
  });  // bf16 element 2 = 0x7f80: +infinity
  expect_error(eval(), "tensor layers.0.attn_norm.weight holds a NaN or an infinity at element 2");
  SetUp();  // a fresh shard
  rewrite_shard("", "", [](const std::string& name, std::string& bytes) {
    if (name == "layers.1.attn.wq_b.scale") bytes[3] = '\x7f', bytes[2] = '\xc0';  // f32 NaN
  });
  expect_error(eval(),
               "tensor layers.1.attn.wq_b.scale holds a NaN or an infinity at element [0, 0]");
}

TEST_F(ModelLoadErrors, UnexpectedTensorIsNamed) {
  rewrite_shard("", "layers.1.attn.bogus.weight");
  expect_error(eval(), "layers.1.attn.bogus.weight");
}

TEST_F(ModelLoadErrors, ConfigShapeDisagreementNamesTensor) {
  expect_error(eval("--config " + config_with({{"kv_lora_rank", 64}})),
               "layers.0.attn.wkv_a.weight");
}

TEST_F(ModelLoadErrors, ConfigWithFewerLayersReportsLeftoverTensor) {
  expect_error(eval("--config " + config_with({{"n_layers", 2}})), "layers.2.");
}

TEST_F(ModelLoadErrors, ConfigDtypeDisagreement) {
  expect_error(eval("--config " + config_with({{"dtype", "bf16"}})), "bf16");
}

TEST_F(ModelLoadErrors, TruncatedShard) {
  fs::resize_file(ckpt_ + "/model0-mp1.safetensors",
                  fs::file_size(ckpt_ + "/model0-mp1.safetensors") - 100);
  expect_error(eval(), "model0-mp1.safetensors");
}

TEST_F(ModelLoadErrors, CorruptHeader) {
  test::write_file(ckpt_ + "/model0-mp1.safetensors",
                   std::string("\x10\0\0\0\0\0\0\0{not json here!}", 24));
  expect_error(eval(), "not valid JSON");
}

TEST_F(ModelLoadErrors, MissingConfigJson) {
  fs::remove(ckpt_ + "/config.json");
  expect_error(eval(), "config.json");
}

TEST_F(ModelLoadErrors, UnknownConfigKey) {
  expect_error(eval("--config " + config_with({{"n_expert", 3}})), "n_expert");
}

TEST_F(ModelLoadErrors, PromptLongerThanMaxSeqLen) {
  // The generate prompts of the case have up to 9 tokens; prefill 7 + 5 decode steps = 12.
  json c = json::parse(test::read_file(case_));
  c.erase("decode_tokens");
  case_ = test::scratch_dir("case") + "/case.json";
  test::write_file(case_, c.dump());
  expect_error(eval("--config " + config_with({{"max_seq_len", 8}})), "max_seq_len");
}

TEST_F(ModelLoadErrors, MorePromptsThanMaxBatchSize) {
  expect_error(eval("--config " + config_with({{"max_batch_size", 2}})), "max_batch_size");
}

TEST_F(ModelLoadErrors, TokenOutsideVocabulary) {
  json c = json::parse(test::read_file(case_));
  c["generate"]["prompts"][0][0] = 5000;
  case_ = test::scratch_dir("case") + "/case.json";
  test::write_file(case_, c.dump());
  expect_error(eval(), "5000");
}

TEST_F(ModelLoadErrors, MissingCheckpointDirectory) {
  ckpt_ = ckpt_ + "/nope";
  expect_error(eval("--config " + config_with(json::object())), "nope");
}

TEST_F(ModelLoadErrors, HelpListsFlags) {
  auto r = run_dsinfer("eval --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--ckpt-path", "--config", "--case", "--out", "--seed"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace dsinfer::model_load_test
