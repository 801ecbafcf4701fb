// Error messages quote hostile JSON through json_excerpt: short, and without recursion, so a
// 50 000-deep value in a config field, a safetensors shape or a tokenizer.json part is one clear
// Error naming the field, not a stack overflow.
#include "core/json_excerpt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/eval_case.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "test_support.h"

namespace dsinfer::json_excerpt_test {
namespace {

using json = nlohmann::json;

std::string deep(int levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); }

TEST(JsonExcerpt, ShortForEveryKindAndNeverDeep) {
  EXPECT_EQ(json_excerpt(json(7)), "7");
  EXPECT_EQ(json_excerpt(json("abc")), "\"abc\"");
  EXPECT_EQ(json_excerpt(json(std::string(500, 'x')), 20), "\"" + std::string(19, 'x') + "...");
  EXPECT_EQ(json_excerpt(json::parse("[1, 2, 3]")), "[1, 2, 3] (an array of 3)");
  EXPECT_EQ(json_excerpt(json::parse("[1, [2], {}, 4, 5, 6]")),
            "[1, [...], {...}, 4, ...] (an array of 6)");
  EXPECT_EQ(json_excerpt(json::parse(R"({"a": 1, "b": [2]})")),
            "an object of 2 keys (\"a\", \"b\")");
  const json hostile = json::parse(deep(50000));
  EXPECT_EQ(json_excerpt(hostile), "[[...]] (an array of 1)");
}

void expect_error_naming(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 1000u) << "a message, not the value";
  }
}

TEST(JsonExcerpt, DeepConfigFieldsAreClearErrors) {
  const std::string dir = test::scratch_dir("config");
  const json base =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/hf/config.json")));
  for (const char* field : {"vocab_size", "rope_scaling", "quantization_config", "rope_theta"}) {
    std::string text = base.dump();
    const std::string key = std::string("\"") + field + "\":";
    const size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos) << field;
    // replace the field's value by a 50 000-deep array
    size_t end = at + key.size(), depth = 0;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (depth == 0) break;
        --depth;
      }
      if (c == ',' && depth == 0) break;
    }
    text = text.substr(0, at + key.size()) + deep(50000) + text.substr(end);
    const std::string path = dir + "/" + field + ".json";
    test::write_file(path, text);
    expect_error_naming([&] { load_config(path); }, field);
  }
}

TEST(JsonExcerpt, ADeepSafetensorsShapeIsAClearError) {
  const std::string header =
      R"({"w": {"dtype": "F32", "shape": )" + deep(50000) + R"(, "data_offsets": [0, 4]}})";
  const std::string path = test::scratch_dir("st") + "/deep.safetensors";
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(4, '\0');
  out.close();
  expect_error_naming([&] { SafetensorsFile f(path); }, "shape");
}

TEST(JsonInteger, WholeAndInRangeOrAnError) {
  EXPECT_EQ(json_integer(json(5), 0, 10, "x"), 5);
  EXPECT_EQ(json_integer(json(-1), -1, 10, "x"), -1);
  for (const char* bad :
       {"1099511627776", "10.7", "\"3\"", "-2", "18446744073709551615", "null", "[1]"})
    expect_error_naming([&] { json_integer(json::parse(bad), -1, INT32_MAX, "the field"); },
                        "the field must be an integer in [-1, 2147483647], got");
}

// Case files: a token of 2^40 used to be read as 0 and max_new_tokens 10.7 as 10.
TEST(JsonInteger, CaseFilesRefuseWhatDoesNotFit) {
  const std::string dir = test::scratch_dir("cases");
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prefill_tokens": [[1, 1099511627776]]})",
       "a token of prefill_tokens must be an integer"},
      {R"({"prefill_tokens": [[1, 2]], "decode_tokens": [[-5]]})", "a token of decode_tokens"},
      {R"({"generate": {"prompts": [[1]], "max_new_tokens": 10.7}})",
       "generate.max_new_tokens must be an integer"},
      {R"({"generate": {"prompts": [[1]], "max_new_tokens": 4, "eos_id": "1"}})",
       "generate.eos_id"},
      {R"({"generate": {"prompts": [[1]], "max_new_tokens": 4, "temperature": "hot"}})",
       "generate.temperature must be a number"},
      {R"({"generate": [1]})", "generate needs prompts and max_new_tokens"},
  };
  int i = 0;
  for (const auto& [text, message] : cases) {
    const std::string path = dir + "/case" + std::to_string(i++) + ".json";
    test::write_file(path, text);
    expect_error_naming([&] { read_eval_case(path); }, message);
    expect_error_naming([&] { read_eval_case(path); }, path);
  }
}

}  // namespace
}  // namespace dsinfer::json_excerpt_test
