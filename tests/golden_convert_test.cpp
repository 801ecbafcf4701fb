// Golden tests of the checkpoint tools, through the real binary:
// - convert: every tests/data/golden/<model>/convert-mp<P>.manifest.json (written by the
//   reference convert.py) must be reproduced tensor for tensor: same files, same names, dtypes,
//   shapes and sha256 of the bytes, nothing extra; config.json copied.
// - fp8-cast-bf16: every dequantized element equals bf16(fp8 x block scale), computed here
//   independently with the slow field decoder; scales gone; index rewritten; the rest
//   byte-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::golden_convert_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::data_path;
using test::read_file;
using test::run_dsinfer;
using test::scratch_dir;
using test::sha256_hex;

struct ManifestCase {
  std::string model;  // e.g. "tiny-v3-story"
  int mp = 0;
  std::string manifest;  // path
};

// What gtest prints for a case (instead of its bytes).
void PrintTo(const ManifestCase& c, std::ostream* os) { *os << c.model << " mp" << c.mp; }

// Every convert-mp*.manifest.json under tests/data/golden, found when the tests are listed.
std::vector<ManifestCase> manifest_cases() {
  std::vector<ManifestCase> cases;
  const fs::path golden = data_path("golden");
  if (!fs::is_directory(golden)) return cases;
  for (const auto& model : fs::directory_iterator(golden)) {
    if (!model.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(model.path())) {
      const std::string name = file.path().filename().string();
      const std::string prefix = "convert-mp", suffix = ".manifest.json";
      if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const int mp =
          std::stoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
      cases.push_back({model.path().filename().string(), mp, file.path().string()});
    }
  }
  std::sort(cases.begin(), cases.end(), [](const ManifestCase& a, const ManifestCase& b) {
    return a.model != b.model ? a.model < b.model : a.mp < b.mp;
  });
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<ManifestCase>& info) {
  std::string name = info.param.model + "_mp" + std::to_string(info.param.mp);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

json read_json(const std::string& path) { return json::parse(read_file(path)); }

std::set<std::string> safetensors_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") names.insert(entry.path().filename().string());
  return names;
}

class GoldenConvert : public ::testing::TestWithParam<ManifestCase> {};

TEST_P(GoldenConvert, MatchesReferenceManifest) {
  const ManifestCase& c = GetParam();
  const std::string hf = data_path("golden/" + c.model + "/hf");
  const int n_experts = read_json(hf + "/config.json").at("n_routed_experts").get<int>();
  const std::string out = scratch_dir("out") + "/shards";  // convert creates it
  const auto result =
      run_dsinfer("convert --hf-ckpt-path " + hf + " --save-path " + out + " --n-experts " +
                  std::to_string(n_experts) + " --model-parallel " + std::to_string(c.mp));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("convert: wrote"), std::string::npos) << result.err;

  const json manifest = read_json(c.manifest);
  std::set<std::string> expected_files;
  for (const auto& [file, tensors] : manifest.items()) expected_files.insert(file);
  ASSERT_EQ(safetensors_in(out), expected_files);
  EXPECT_EQ(expected_files.size(), static_cast<size_t>(c.mp));

  for (const auto& [file, tensors] : manifest.items()) {
    SCOPED_TRACE(file);
    SafetensorsFile st(out + "/" + file);
    EXPECT_EQ(st.tensors().size(), tensors.size());
    for (const auto& [name, want] : tensors.items()) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(st.contains(name));
      const TensorView& t = st.get(name);
      EXPECT_EQ(dtype_name(t.dtype), want.at("dtype").get<std::string>());
      EXPECT_EQ(t.shape, want.at("shape").get<std::vector<int64_t>>());
      EXPECT_EQ(sha256_hex(t.data, t.n_bytes), want.at("sha256").get<std::string>());
    }
    for (const auto& [name, view] : st.tensors())
      EXPECT_TRUE(tensors.contains(name)) << "extra tensor " << name;
  }
  EXPECT_EQ(read_file(out + "/config.json"), read_file(hf + "/config.json"));
  for (const auto& entry : fs::directory_iterator(out))
    EXPECT_NE(entry.path().extension(), ".partial") << entry.path();
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenConvert, ::testing::ValuesIn(manifest_cases()), case_name);

// The manifests the task promises are all there (so a lost file cannot silently shrink the
// parameterized suite above).
TEST(GoldenConvertData, AllManifestsPresent) {
  std::set<std::string> found;
  for (const ManifestCase& c : manifest_cases())
    found.insert(c.model + "/mp" + std::to_string(c.mp));
  for (const char* want :
       {"tiny-v2/mp1", "tiny-v2/mp2", "tiny-v2/mp4", "tiny-v2-lite/mp1", "tiny-v2-lite/mp2",
        "tiny-v2-lite/mp4", "tiny-v3/mp1", "tiny-v3/mp2", "tiny-v3-chat/mp1", "tiny-v3-chat/mp2",
        "tiny-v3-story/mp1", "tiny-v3-story/mp2"})
    EXPECT_TRUE(found.count(want)) << want;
}

// ---- fp8-cast-bf16 ----

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

float f32_at(const TensorView& t, int64_t i) {
  float v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

class Fp8CastBf16Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8CastBf16Golden, DequantizesEveryWeightExactly) {
  const std::string model = GetParam();
  const std::string hf = data_path("golden/" + model + "/hf");
  const std::string out = scratch_dir("out") + "/bf16";
  const auto result =
      run_dsinfer("fp8-cast-bf16 --input-fp8-hf-path " + hf + " --output-bf16-hf-path " + out);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("quantization_config"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("Warning: Missing scale_inv"), std::string::npos) << result.err;

  // The same safetensors files, plus the index; nothing else (as the reference).
  std::set<std::string> want_files = safetensors_in(hf), got_files;
  want_files.insert("model.safetensors.index.json");
  for (const auto& entry : fs::directory_iterator(out))
    got_files.insert(entry.path().filename().string());
  EXPECT_EQ(got_files, want_files);

  CheckpointDir in(hf);
  CheckpointDir bf16(out);  // also validates the new index against the new files
  size_t dequantized = 0, copied = 0;
  for (const auto& [name, src] : in.tensors()) {
    SCOPED_TRACE(name);
    if (ends_with(name, "_scale_inv")) {
      EXPECT_EQ(bf16.find(name), nullptr) << "scale not dropped";
      continue;
    }
    const TensorView* dst = bf16.find(name);
    ASSERT_NE(dst, nullptr);
    EXPECT_EQ(fs::path(dst->file).filename(), fs::path(src->file).filename());
    EXPECT_EQ(dst->shape, src->shape);
    const TensorView* scale = in.find(name + "_scale_inv");
    if (src->dtype != DType::kF8E4M3 || !scale) {
      EXPECT_EQ(dst->dtype, src->dtype);
      ASSERT_EQ(dst->n_bytes, src->n_bytes);
      EXPECT_EQ(std::memcmp(dst->data, src->data, src->n_bytes), 0);
      ++copied;
      continue;
    }
    ASSERT_EQ(dst->dtype, DType::kBF16);
    ASSERT_EQ(scale->dtype, DType::kF32);
    const int64_t rows = src->dim(0), cols = src->dim(1);
    const int64_t scale_cols = (cols + 127) / 128;
    ASSERT_EQ(scale->shape, (std::vector<int64_t>{(rows + 127) / 128, scale_cols}));
    int64_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float s = f32_at(*scale, (r / 128) * scale_cols + c / 128);
        const uint16_t want = f32_to_bf16(fp8_e4m3_to_f32_slow(src->data[r * cols + c]) * s);
        uint16_t got;
        std::memcpy(&got, dst->data + 2 * (r * cols + c), 2);
        if (got != want && ++mismatches <= 5)
          ADD_FAILURE() << "element [" << r << ", " << c << "]: got 0x" << std::hex << got
                        << ", want 0x" << want;
      }
    }
    EXPECT_EQ(mismatches, 0);
    ++dequantized;
  }
  EXPECT_GT(dequantized, 0u);
  EXPECT_GT(copied, 0u);
  EXPECT_EQ(bf16.tensors().size(), dequantized + copied);

  // The index: json.dump({"metadata": {}, "weight_map": ...}, indent=2), scales removed, the
  // input's entry order kept.
  const std::string text = read_file(out + "/model.safetensors.index.json");
  EXPECT_EQ(text.rfind("{\n  \"metadata\": {},\n  \"weight_map\": {\n    \"", 0), 0u)
      << text.substr(0, 80);
  EXPECT_EQ(text.back(), '}');
  const nlohmann::ordered_json index = nlohmann::ordered_json::parse(text);
  const nlohmann::ordered_json original =
      nlohmann::ordered_json::parse(read_file(hf + "/model.safetensors.index.json"));
  std::vector<std::pair<std::string, std::string>> want_map, got_map;
  for (const auto& [k, v] : original.at("weight_map").items())
    if (!ends_with(k, "_scale_inv")) want_map.emplace_back(k, v.get<std::string>());
  for (const auto& [k, v] : index.at("weight_map").items())
    got_map.emplace_back(k, v.get<std::string>());
  EXPECT_EQ(got_map, want_map);
  EXPECT_TRUE(index.at("metadata").is_object() && index.at("metadata").empty());
}

// tiny-v3-chat keeps one scale in the other file than its weight (found through the index).
INSTANTIATE_TEST_SUITE_P(Golden, Fp8CastBf16Golden, ::testing::Values("tiny-v3", "tiny-v3-chat"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace dsinfer::golden_convert_test
