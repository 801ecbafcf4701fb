// Structured output's promise on the random chat model and the story model: 100 seeded samples
// per JSON Schema (tests/structured_output_support.h's three) all end with "stop", parse, and
// validate against the schema (tests/json_schema_validator.h, written apart from the grammar
// engine), and the seeds draw different answers.
#include <gtest/gtest.h>

#include <set>

#include "json_schema_validator.h"
#include "structured_output_support.h"

namespace dsinfer::structured_output_samples_test {
namespace {

using json = nlohmann::json;
using test::Answer;
using test::chat_prompt;

using Loaded = test::ModelWithGrammar;
using test::run_together;
using test::schema_params;
using test::test_schemas;
using Tokens = std::vector<int32_t>;

void expect_valid_samples(const std::string& model) {
  Loaded& m = test::model_with_grammar(model);
  const Tokens prompt = chat_prompt("Describe a person as JSON.");
  for (const json& schema : test_schemas()) {
    std::vector<std::pair<Tokens, SamplingParams>> rs;
    for (uint64_t seed = 0; seed < 100; ++seed) rs.push_back({prompt, schema_params(schema, seed)});
    const std::vector<Answer> answers = run_together(m, rs);
    std::set<std::string> distinct;
    for (size_t i = 0; i < answers.size(); ++i) {
      const Answer& a = answers[i];
      ASSERT_EQ(a.reason, FinishReason::kStop) << "seed " << i << ": " << a.error << a.text();
      const json value = json::parse(a.text(), nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << "seed " << i << ": not JSON: " << a.text();
      EXPECT_EQ(test::schema_violation(value, schema, schema), "") << a.text();
      distinct.insert(a.text());
    }
    EXPECT_GT(distinct.size(), 10u) << "the seeds should draw different answers";
  }
}

TEST(StructuredOutput, EverySampleIsValidOnTheRandomChatModel) {
  expect_valid_samples("tiny-v3-chat");
}

TEST(StructuredOutput, EverySampleIsValidOnTheStoryModel) { expect_valid_samples("tiny-v3-story"); }

}  // namespace
}  // namespace dsinfer::structured_output_samples_test
