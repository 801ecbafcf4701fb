#include "io/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::checkpoint_dir_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;
using test::read_file;
using test::scratch_dir;
using test::write_file;

using test::error_of;

const char* kFile1 = "model-00001-of-00002.safetensors";
const char* kFile2 = "model-00002-of-00002.safetensors";
const char* kIndex = "model.safetensors.index.json";

std::string golden_hf() { return data_path("golden/tiny-v3/hf"); }

// A copy of the tiny-v3 checkpoint (safetensors files and, optionally, the index).
std::string copy_checkpoint(const std::string& name, bool with_index) {
  const std::string dir = scratch_dir(name);
  for (const char* f : {kFile1, kFile2}) fs::copy_file(golden_hf() + "/" + f, dir + "/" + f);
  if (with_index) fs::copy_file(golden_hf() + "/" + kIndex, dir + "/" + kIndex);
  return dir;
}

json load_index(const std::string& dir) { return json::parse(read_file(dir + "/" + kIndex)); }
void save_index(const std::string& dir, const json& index) {
  write_file(dir + "/" + kIndex, index.dump(1));
}

TEST(CheckpointDir, OpensGoldenCheckpointWithIndex) {
  const std::string dir = golden_hf();
  CheckpointDir ckpt(dir);
  EXPECT_TRUE(ckpt.has_index());
  EXPECT_EQ(ckpt.dir(), dir);
  ASSERT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(fs::path(ckpt.files()[0]->path()).filename(), kFile1);
  EXPECT_EQ(fs::path(ckpt.files()[1]->path()).filename(), kFile2);
  const json weight_map = load_index(dir)["weight_map"];
  ASSERT_EQ(ckpt.tensors().size(), weight_map.size());
  // Every index entry resolves to a tensor in the file the index names.
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const TensorView* view = ckpt.find(it.key());
    ASSERT_NE(view, nullptr) << it.key();
    EXPECT_EQ(view->name, it.key());
    EXPECT_EQ(fs::path(view->file).filename(), it.value().get<std::string>()) << it.key();
    EXPECT_EQ(&ckpt.get(it.key()), view);
  }
  const TensorView& embed = ckpt.get("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::kBF16);
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{2048, 256}));
  const TensorView& wq_b = ckpt.get("model.layers.0.self_attn.q_b_proj.weight");
  EXPECT_EQ(wq_b.dtype, DType::kF8E4M3);
  const TensorView& wq_b_scale = ckpt.get("model.layers.0.self_attn.q_b_proj.weight_scale_inv");
  EXPECT_EQ(wq_b_scale.dtype, DType::kF32);
  EXPECT_EQ(wq_b_scale.shape,
            (std::vector<int64_t>{ceil_div(wq_b.dim(0), 128), ceil_div(wq_b.dim(1), 128)}));
  const TensorView& bias = ckpt.get("model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(bias.dtype, DType::kF32);

  EXPECT_EQ(ckpt.find("model.layers.99.nothing"), nullptr);
  std::string msg = error_of([&] { ckpt.get("model.layers.99.nothing"); });
  EXPECT_CONTAINS(msg, dir);
  EXPECT_CONTAINS(msg, "model.layers.99.nothing");
}

TEST(CheckpointDir, WithoutIndexListsEverySafetensorsFile) {
  const std::string dir = copy_checkpoint("noindex", /*with_index=*/false);
  write_file(dir + "/README.md", "not a tensor file");
  write_file(dir + "/notes.safetensors.txt", "neither");
  fs::create_directory(dir + "/sub.safetensors");  // a directory is not a file
  CheckpointDir ckpt(dir);
  EXPECT_FALSE(ckpt.has_index());
  ASSERT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(fs::path(ckpt.files()[0]->path()).filename(), kFile1);
  EXPECT_EQ(fs::path(ckpt.files()[1]->path()).filename(), kFile2);
  CheckpointDir golden(golden_hf());
  ASSERT_EQ(ckpt.tensors().size(), golden.tensors().size());
  for (const auto& [name, view] : golden.tensors()) {
    const TensorView* copy = ckpt.find(name);
    ASSERT_NE(copy, nullptr) << name;
    EXPECT_EQ(fs::path(copy->file).filename(), fs::path(view->file).filename()) << name;
    EXPECT_EQ(copy->shape, view->shape) << name;
  }
}

TEST(CheckpointDir, IndexNamingMissingFileIsAnError) {
  const std::string dir = copy_checkpoint("missing", true);
  json index = load_index(dir);
  index["weight_map"]["lm_head.weight"] = "model-00003-of-00003.safetensors";
  save_index(dir, index);
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "model-00003-of-00003.safetensors");
  EXPECT_CONTAINS(msg, kIndex);
  EXPECT_CONTAINS(msg, "missing");

  // The index is intact but a shard file was deleted.
  const std::string dir2 = copy_checkpoint("deleted", true);
  fs::remove(dir2 + "/" + kFile2);
  msg = error_of([&] { CheckpointDir ckpt(dir2); });
  EXPECT_CONTAINS(msg, kFile2);
}

// The index's file names stay inside the checkpoint: "../x", "/x", "." would read (or try to map)
// files elsewhere.
TEST(CheckpointDir, IndexNamingAFileOutsideTheDirectoryIsAnError) {
  const std::string dir = copy_checkpoint("outside", true);
  const std::string elsewhere = copy_checkpoint("elsewhere", false);
  for (const std::string& file : {"../elsewhere/" + std::string(kFile1), elsewhere + "/" + kFile1,
                                  std::string("."), std::string("..")}) {
    SCOPED_TRACE(file);
    json index = load_index(dir);
    index["weight_map"]["lm_head.weight"] = file;
    save_index(dir, index);
    const std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
    EXPECT_CONTAINS(msg, kIndex);
    EXPECT_CONTAINS(
        msg, "\"lm_head.weight\" names \"" + file + "\", not a file of the checkpoint directory");
  }
  // the pieces alone
  EXPECT_CONTAINS(error_of([] { parse_weight_map(R"({"weight_map": {"a": 5}})", "I"); }),
                  "I: weight_map entry \"a\"");
  EXPECT_CONTAINS(error_of([] { parse_weight_map(R"({"weight_map": []})", "I"); }),
                  "I has no weight_map object");
  EXPECT_EQ(parse_weight_map(R"({"weight_map": {"a": "f.safetensors"}})", "I").at("a"),
            "f.safetensors");
}

TEST(CheckpointDir, IndexMappingTensorToWrongFileIsAnError) {
  const std::string dir = copy_checkpoint("wrongfile", true);
  json index = load_index(dir);
  const std::string name = "model.embed_tokens.weight";
  ASSERT_EQ(index["weight_map"][name], kFile1);
  index["weight_map"][name] = kFile2;
  save_index(dir, index);
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, name);
  EXPECT_CONTAINS(msg, kFile2);
  EXPECT_CONTAINS(msg, std::string("it is in ") + dir + "/" + kFile1);
}

TEST(CheckpointDir, IndexNamingAbsentTensorIsAnError) {
  const std::string dir = copy_checkpoint("absent", true);
  json index = load_index(dir);
  index["weight_map"]["model.layers.0.mlp.ghost.weight"] = kFile1;
  save_index(dir, index);
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "model.layers.0.mlp.ghost.weight");
  EXPECT_CONTAINS(msg, "no file holds it");
}

TEST(CheckpointDir, BadIndexIsAnError) {
  const std::string dir = copy_checkpoint("badindex", true);
  write_file(dir + "/" + kIndex, "{ not json");
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, kIndex);
  EXPECT_CONTAINS(msg, "not valid JSON");

  write_file(dir + "/" + kIndex, R"({"metadata": {}})");
  msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "no weight_map");

  write_file(dir + "/" + kIndex, R"({"weight_map": {"lm_head.weight": 3}})");
  msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "lm_head.weight");
}

void write_tensor_file(const std::string& path, const std::vector<std::string>& names) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& n : names) entries.push_back({n, DType::kF32, {2}});
  SafetensorsWriter writer(path, entries);
  const float v[2] = {1, 2};
  for (const auto& n : names) writer.write(n, v, sizeof v);
  writer.finish();
}

TEST(CheckpointDir, TensorInTwoFilesIsAnError) {
  const std::string dir = scratch_dir("dup");
  write_tensor_file(dir + "/a.safetensors", {"x", "shared.weight"});
  write_tensor_file(dir + "/b.safetensors", {"y", "shared.weight"});
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "shared.weight");
  EXPECT_CONTAINS(msg, dir + "/a.safetensors");
  EXPECT_CONTAINS(msg, dir + "/b.safetensors");

  // Also when an index lists both files.
  write_file(
      dir + "/" + kIndex,
      R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors", "shared.weight": "a.safetensors"}})");
  msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "shared.weight");
}

TEST(CheckpointDir, CorruptShardIsAnErrorNamingIt) {
  const std::string dir = copy_checkpoint("corrupt", true);
  fs::resize_file(dir + "/" + kFile2, fs::file_size(dir + "/" + kFile2) - 100);
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, dir + "/" + kFile2);
  EXPECT_CONTAINS(msg, "truncated");
}

TEST(CheckpointDir, EmptyOrMissingDirectoryIsAnError) {
  const std::string dir = scratch_dir("empty");
  std::string msg = error_of([&] { CheckpointDir ckpt(dir); });
  EXPECT_CONTAINS(msg, "no .safetensors files");
  EXPECT_CONTAINS(msg, dir);
  msg = error_of([&] { CheckpointDir ckpt(dir + "/nowhere"); });
  EXPECT_CONTAINS(msg, dir + "/nowhere");
}

TEST(CheckpointDir, ListFiles) {
  const std::string dir = scratch_dir("list");
  for (const char* f : {"b.safetensors", "a.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "x.safetensors.bak"})
    write_file(dir + "/" + f, "");
  fs::create_directory(dir + "/c.safetensors");
  EXPECT_EQ(list_files(dir, ".safetensors"),
            (std::vector<std::string>{dir + "/a.safetensors", dir + "/b.safetensors"}));
  EXPECT_EQ(list_files_containing(dir, "token"),
            (std::vector<std::string>{dir + "/tokenizer.json", dir + "/tokenizer_config.json"}));
  EXPECT_TRUE(list_files(dir, ".gguf").empty());
}

}  // namespace
}  // namespace dsinfer::checkpoint_dir_test
