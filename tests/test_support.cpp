#include "test_support.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convert/convert.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/eval_case.h"
#include "io/safetensors.h"

namespace dsinfer::test {

namespace fs = std::filesystem;

std::string data_path(const std::string& relative) {
  return std::string(DSINFER_TEST_DATA) + "/" + relative;
}

std::string scratch_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  fs::path dir = fs::path(DSINFER_TEST_TMP) / test / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string model_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string backend_test_name(const std::string& backend) {
  std::string name = backend;
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

std::string convert_golden(const std::string& model, int world_size, bool with_tokenizer,
                           bool keep_mtp, const std::string& formats) {
  const std::string golden = data_path("golden/" + model);
  const auto config = nlohmann::json::parse(read_file(golden + "/hf/config.json"));
  std::string suffix;
  for (char ch : formats) suffix += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
  const std::string ckpt = scratch_dir("ckpt-" + model + "-mp" + std::to_string(world_size) +
                                       (keep_mtp ? "-mtp" : "") + suffix);
  // In this process (the library dsinfer convert calls): unit tests need no binary. convert's
  // own tests run the binary and compare its files with the reference's.
  ConvertOptions options;
  options.hf_ckpt_path = golden + "/hf";
  options.save_path = ckpt;
  options.n_experts = config["n_routed_experts"].get<int>();
  options.model_parallel = world_size;
  options.keep_mtp = keep_mtp;
  std::istringstream flags(formats);
  for (std::string flag; flags >> flag;) {
    if (flag == "--experts-int4") {
      options.experts_int4 = true;
    } else if (flag == "--int8") {
      options.int8 = true;
    } else {
      ADD_FAILURE() << "convert_golden: unknown format flag " << flag;
    }
  }
  const LogLevel level = log_level();
  set_log_level(LogLevel::kQuiet);
  try {
    convert_checkpoint(options);
  } catch (const Error& e) {
    ADD_FAILURE() << "converting " << model << ": " << e.what();
  }
  set_log_level(level);
  if (with_tokenizer)
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(data_path(std::string("tokenizer/deepseek-v3/") + f), ckpt + "/" + f);
  return ckpt;
}

AgainstDemo compare_with_demos_bf16(const std::string& ours_path, const std::string& golden_dir,
                                    const std::string& label) {
  const auto ours = compare_logits(ours_path, golden_dir + "/ref-mp1-fp32.safetensors");
  const auto demo = compare_logits(golden_dir + "/ref-mp1-bf16.safetensors",
                                   golden_dir + "/ref-mp1-fp32.safetensors");
  EXPECT_EQ(ours.size(), demo.size());
  AgainstDemo a;
  a.rows = std::min(ours.size(), demo.size());
  for (size_t row = 0; row < a.rows; ++row) {
    a.kept += ours[row].same_argmax;
    a.demo_kept += demo[row].same_argmax;
  }
  a.ours = summarize(ours);
  a.demo = summarize(demo);
  std::printf(
      "[ %s ] median row max|d|/max|ref| %.3g (the demo's bf16 run %.3g), rows over 0.1: %d (%d), "
      "argmax kept %d (%d) of %zu\n",
      label.c_str(), a.ours.median_ratio, a.demo.median_ratio, a.ours.far_rows, a.demo.far_rows,
      a.kept, a.demo_kept, a.rows);
  return a;
}

std::vector<LogitsRow> compare_logits(const std::string& ours_path, const std::string& ref_path) {
  SafetensorsFile ours(ours_path);
  SafetensorsFile ref(ref_path);
  const TensorView& a = ours.get("logits");
  const TensorView& r = ref.get("logits");
  EXPECT_EQ(a.shape, r.shape);
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(r.dtype, DType::kF32);
  if (a.shape != r.shape || a.dtype != DType::kF32 || r.dtype != DType::kF32 || r.shape.size() != 3)
    return {{INFINITY, false}};
  return compare_logit_rows(reinterpret_cast<const float*>(a.data),
                            reinterpret_cast<const float*>(r.data), r.shape[0] * r.shape[1],
                            r.shape[2]);
}

double expect_logits_match(const std::string& ours_path, const std::string& ref_path) {
  double worst = 0;
  const std::vector<LogitsRow> rows = compare_logits(ours_path, ref_path);
  for (size_t row = 0; row < rows.size(); ++row) {
    worst = std::max(worst, rows[row].ratio);
    EXPECT_LE(rows[row].ratio, 1e-3) << "row " << row;
    EXPECT_TRUE(rows[row].same_argmax) << "argmax of row " << row;
  }
  return worst;
}

std::vector<std::string> split_inp(const std::string& text) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
    cases.push_back(text.substr(start, at - start));
    start = at + sep.size();
  }
  EXPECT_EQ(start, text.size()) << "text after the last separator";
  return cases;
}

std::vector<std::vector<int32_t>> parse_out(const std::string& text) {
  std::vector<std::vector<int32_t>> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<int32_t> ids;
    std::istringstream ls(line);
    int32_t id;
    while (ls >> id) ids.push_back(id);
    lines.push_back(ids);
  }
  return lines;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no dsinfer::Error thrown";
  return "";
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, digest, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[digest[i] >> 4];
    s += hex[digest[i] & 15];
  }
  return s;
}

}  // namespace dsinfer::test
