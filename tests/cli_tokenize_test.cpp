// dsinfer tokenize and dsinfer perplexity --input-file through the binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.h"

namespace dsinfer::cli_tokenize_test {
namespace {

using json = nlohmann::json;
using test::data_path;
using test::run_dsinfer;

const std::string kTokenizer = "--tokenizer-path " + data_path("tokenizer/deepseek-v3");

std::string ids_line(const json& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i].get<int>());
  return s + "\n";
}

TEST(CliTokenize, TextGivesIds) {
  auto r = run_dsinfer("tokenize " + kTokenizer + " --text 'Hello, world!'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "19923 14 2058 3\n");
}

TEST(CliTokenize, AddSpecialTokensPutsBosFirst) {
  auto r = run_dsinfer("tokenize " + kTokenizer + " --text 'Hello world' --add-special-tokens");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0 19923 2058\n");
}

TEST(CliTokenize, ChatAppliesTheTemplate) {
  auto r = run_dsinfer("tokenize " + kTokenizer + " --text Hi --chat");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0 128803 23166 128804\n");
}

TEST(CliTokenize, JsonlInputGivesOneLinePerInput) {
  // every line of the HF-generated vectors, in one run
  const std::string path = data_path("tokenizer/deepseek-v3/extra-encodings.generated.jsonl");
  std::istringstream lines(test::read_file(path));
  std::string line, inputs, expected;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    inputs += json(j["text"]).dump() + "\n";
    expected += ids_line(j["ids"]);
  }
  const std::string file = test::scratch_dir("in") + "/inputs.jsonl";
  test::write_file(file, inputs);
  auto r = run_dsinfer("tokenize " + kTokenizer + " --input-file " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

TEST(CliTokenize, DecodeGivesText) {
  auto r = run_dsinfer("tokenize " + kTokenizer + " --decode '0 19923 14 2058 3'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<｜begin▁of▁sentence｜>Hello, world!\n");
  r = run_dsinfer("tokenize " + kTokenizer + " --decode '0 19923 14 2058 3' --skip-special-tokens");
  EXPECT_EQ(r.out, "Hello, world!\n");
}

TEST(CliTokenize, BadInputIsAClearError) {
  auto r = run_dsinfer("tokenize " + kTokenizer + " --decode '12 abc'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("abc"), std::string::npos) << r.err;
  const std::string file = test::scratch_dir("in") + "/bad.jsonl";
  test::write_file(file, "\"ok\"\n{\"not\": \"a string\"}\n");
  r = run_dsinfer("tokenize " + kTokenizer + " --input-file " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":2"), std::string::npos) << r.err;
  // one input only: --text beside --decode was silently ignored (PROBE-3 U4), and so is none
  for (const std::string& args :
       {std::string(" --decode 5 --text hi"), " --decode 5 --input-file " + file,
        " --text hi --input-file " + file, std::string()}) {
    r = run_dsinfer("tokenize " + kTokenizer + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find("give exactly one of --text, --input-file and --decode"),
              std::string::npos)
        << args << ": " << r.err;
  }
  r = run_dsinfer("tokenize " + kTokenizer + " --decode ''");  // zero ids: an empty line
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  r = run_dsinfer("tokenize --tokenizer-path /nonexistent --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
}

TEST(CliPerplexity, TextInputIsScored) {
  const std::string golden = data_path("golden/tiny-v3-story");
  const std::string ckpt = test::scratch_dir("ckpt");
  auto r = run_dsinfer("-q convert --hf-ckpt-path " + golden + "/hf --save-path " + ckpt +
                       " --n-experts 8 --model-parallel 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(data_path(std::string("tokenizer/deepseek-v3/") + f),
                               ckpt + "/" + f);
  const std::string text = test::scratch_dir("text") + "/text.txt";
  test::write_file(text, "The old man walked slowly down the road to the house. He was tired.\n");
  r = run_dsinfer("perplexity --ckpt-path " + ckpt + " --input-file " + text + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  ASSERT_EQ(out["nll"].size(), 1u);
  EXPECT_GT(out["nll"][0].size(), 10u);
  // a trained model beats the uniform distribution over 129280 ids (ln 129280 = 11.77) by far
  EXPECT_LT(out["mean_nll"].get<double>(), 9.0);
  EXPECT_NEAR(out["perplexity"].get<double>(), std::exp(out["mean_nll"].get<double>()),
              1e-6 * out["perplexity"].get<double>());
}

}  // namespace
}  // namespace dsinfer::cli_tokenize_test
