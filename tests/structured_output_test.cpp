// Structured output on the engine (engine/token_constraint.h, grammar/grammar_engine.h): a
// constrained request's tokens are the same alone as among others and with its prompt cut into
// chunks (batch invariance); json_object, GBNF and regex grammars hold; a grammar's end ends a
// request without stop ids; forced tool calls of the random chat model parse with valid arguments;
// schemas with keywords the grammar engine lacks are refused naming the keyword. 100 seeded samples
// per schema: structured_output_samples_test (label slow).
#include "serve/structured_output.h"

#include <gtest/gtest.h>

#include <regex>

#include "chat/chat_formatter.h"
#include "chat/deepseek_output.h"
#include "grammar/json_schema_support.h"
#include "json_schema_validator.h"
#include "structured_output_support.h"

namespace dsinfer::structured_output_test {
namespace {

using json = nlohmann::json;
using test::Answer;
using test::chat_prompt;

using Loaded = test::ModelWithGrammar;
using test::run_together;
using test::schema_params;
using test::test_schemas;
using test::tokenizer;
using Tokens = std::vector<int32_t>;

TEST(StructuredOutput, AloneEqualsAmongOthersAndChunked) {
  Loaded& m = test::model_with_grammar("tiny-v3-story");
  const json schema = test_schemas()[1];
  const Tokens prompt = chat_prompt("Give me a color, some tags and a small number.");
  std::vector<std::pair<Tokens, SamplingParams>> rs;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    // others: constrained and not, other prompts
    SamplingParams other = schema_params(test_schemas()[seed % 3], 1000 + seed);
    if (seed % 4 == 0) other.grammar = {};
    rs.push_back({chat_prompt("other " + std::to_string(seed)), other});
  }
  const SamplingParams mine = schema_params(schema, 7);
  rs.insert(rs.begin() + 11, {prompt, mine});
  const Answer together = run_together(m, rs)[11];
  const Answer alone = run_together(m, {{prompt, mine}})[0];
  const Answer chunked = run_together(m, {{prompt, mine}}, /*step_tokens=*/3)[0];
  ASSERT_EQ(alone.reason, FinishReason::kStop) << alone.error;
  EXPECT_EQ(together.tokens, alone.tokens);
  EXPECT_EQ(chunked.tokens, alone.tokens);
  // and the mask is what made it JSON: the same seed unconstrained draws other text
  SamplingParams free = mine;
  free.grammar = {};
  EXPECT_NE(run_together(m, {{prompt, free}})[0].tokens, alone.tokens);
}

// The other requests issue 33 names: penalised (repetition, frequency, presence, logit_bias,
// min_p, min_tokens; constrained or not) and the choices of an n > 1 request (choice index 1..3
// of one seed) give the same tokens alone as among 20 others of every kind.
TEST(StructuredOutput, PenalisedAndChoicesAreAloneAsAmongOthers) {
  Loaded& m = test::model_with_grammar("tiny-v3-story");
  const Tokens prompt = chat_prompt("Tell me about the sea.");
  auto penalised = [&](bool constrained, uint64_t seed) {
    SamplingParams p = schema_params(test_schemas()[0], seed);
    if (!constrained) p.grammar = {};
    p.max_new_tokens = 40;
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.7f;
    p.presence_penalty = 0.4f;
    p.logit_bias = {{tokenizer().encode(" the", false)[0], -3.0f}};
    p.min_p = 0.02f;
    p.min_tokens = 5;
    return p;
  };
  std::vector<std::pair<Tokens, SamplingParams>> mine;
  mine.push_back({prompt, penalised(false, 5)});
  mine.push_back({prompt, penalised(true, 6)});
  for (int choice = 1; choice <= 3; ++choice) {
    SamplingParams p = penalised(false, 9);
    p.choice = choice;
    mine.push_back({prompt, p});
  }
  std::vector<std::pair<Tokens, SamplingParams>> all;
  for (uint64_t k = 0; k < 20; ++k) {
    SamplingParams other = penalised(k % 2 == 0, 100 + k);
    if (k % 3 == 0) other = schema_params(test_schemas()[k % 3], 200 + k);
    all.push_back({chat_prompt("other " + std::to_string(k)), other});
  }
  std::vector<size_t> at;
  for (size_t i = 0; i < mine.size(); ++i) {
    at.push_back(3 + i * 4);
    all.insert(all.begin() + static_cast<std::ptrdiff_t>(at.back()), mine[i]);
  }
  const std::vector<Answer> together = run_together(m, all);
  for (size_t i = 0; i < mine.size(); ++i) {
    const Answer alone = run_together(m, {mine[i]})[0];
    EXPECT_FALSE(alone.tokens.empty());
    EXPECT_EQ(together[at[i]].tokens, alone.tokens) << "request " << i;
  }
}

TEST(StructuredOutput, JsonObjectGbnfAndRegex) {
  Loaded& m = test::model_with_grammar("tiny-v3-story");
  const Tokens prompt = chat_prompt("Answer.");
  SamplingParams p;
  p.max_new_tokens = 40;
  p.stop_ids = {tokenizer().eos_id()};
  std::vector<std::pair<Tokens, SamplingParams>> rs;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    p.temperature = 1.0f;
    p.grammar = {OutputGrammar::Kind::kJsonObject, "", false};
    rs.push_back({prompt, p});
    p.grammar = {OutputGrammar::Kind::kGbnf, R"(root ::= "yes" | "no" | "maybe " [0-9] [0-9]?)",
                 false};
    rs.push_back({prompt, p});
    p.grammar = {OutputGrammar::Kind::kRegex, R"([a-c]{2,4}-[0-9]{3})", false};
    rs.push_back({prompt, p});
  }
  const std::vector<Answer> answers = run_together(m, rs);
  for (size_t i = 0; i < answers.size(); ++i) {
    const Answer& a = answers[i];
    const std::string text = a.text();
    switch (i % 3) {
      case 0: {
        // any object: the random draw may run out of tokens inside a string, so an answer
        // cut by max_tokens must be a prefix of an object, a finished one an object
        if (a.reason == FinishReason::kStop) {
          const json v = json::parse(text, nullptr, false);
          EXPECT_TRUE(v.is_object()) << text;
        } else {
          EXPECT_EQ(a.reason, FinishReason::kLength) << a.error;
          EXPECT_EQ(text.substr(0, 1), "{") << text;
        }
        break;
      }
      case 1:
        EXPECT_EQ(a.reason, FinishReason::kStop) << a.error;
        EXPECT_TRUE(std::regex_match(text, std::regex("yes|no|maybe [0-9][0-9]?"))) << text;
        break;
      case 2:
        EXPECT_EQ(a.reason, FinishReason::kStop) << a.error;
        EXPECT_TRUE(std::regex_match(text, std::regex("[a-c]{2,4}-[0-9]{3}"))) << text;
        break;
    }
  }
}

TEST(StructuredOutput, WithoutStopIdsTheGrammarsEndEndsTheRequest) {
  Loaded& m = test::model_with_grammar("tiny-v3-chat");
  SamplingParams p;
  p.max_new_tokens = 50;
  p.grammar = {OutputGrammar::Kind::kGbnf, R"(root ::= "ok")", false};
  const Answer a = run_together(m, {{chat_prompt("Say ok."), p}})[0];
  EXPECT_EQ(a.reason, FinishReason::kStop) << a.error;
  EXPECT_EQ(a.text(), "ok");
}

// tool_choice "required" on the random chat model (serve/structured_output.h's grammar over the
// V3 template's call format): every answer parses into tool calls (chat/deepseek_output.h) whose
// arguments are valid for their tool; with parallel_tool_calls false, exactly one call.
TEST(StructuredOutput, ForcedToolCallsOfTheRandomChatModelParse) {
  Loaded& m = test::model_with_grammar("tiny-v3-chat");
  const ChatFormatter chat(tokenizer());
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
      "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"zone": {"enum": ["utc", "cet"]}}, "required": ["zone"]}}}])");
  for (const bool parallel : {false, true}) {
    const json body = {{"tool_choice", "required"}, {"parallel_tool_calls", parallel}};
    const auto grammar = tool_choice_grammar(body, tools, chat.tool_call_format());
    const Tokens prompt =
        tokenizer().encode(chat.render(json::array({{{"role", "user"}, {"content", "Weather?"}}}),
                                       tools, json::object()),
                           false);
    std::vector<std::pair<Tokens, SamplingParams>> rs;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      SamplingParams p = schema_params(json::object(), seed);
      p.max_new_tokens = 600;
      p.grammar = grammar.grammar;
      rs.push_back({prompt, p});
    }
    for (const Answer& a : run_together(m, rs)) {
      ASSERT_EQ(a.reason, FinishReason::kStop) << a.error << a.text();
      DeepSeekOutputParser parser;
      OutputDelta all = parser.push(a.text());
      const OutputDelta last = parser.finish();
      all.tool_calls.insert(all.tool_calls.end(), last.tool_calls.begin(), last.tool_calls.end());
      ASSERT_FALSE(all.tool_calls.empty()) << a.text();
      if (!parallel) EXPECT_EQ(all.tool_calls.size(), 1u) << a.text();
      for (const ToolCall& call : all.tool_calls) {
        json schema;
        for (const json& t : tools)
          if (t["function"]["name"] == call.name) schema = t["function"]["parameters"];
        ASSERT_FALSE(schema.is_null()) << call.name;
        const json args = json::parse(call.arguments);
        EXPECT_EQ(test::schema_violation(args, schema, schema), "") << call.arguments;
      }
    }
  }
}

// A prompt that opens the reasoning: no mask until the completion's bytes hold "</think>" (the V3
// tokenizer spells it "</" "think" ">"), then the grammar's, starting from what follows the marker
// in its token.
TEST(StructuredOutput, AGrammarAfterReasoningStartsAtTheThinkEnd) {
  GrammarEngine& g = *test::model_with_grammar("tiny-v3-chat").grammar;
  SamplingParams p;
  p.stop_ids = {tokenizer().eos_id()};
  p.grammar = {OutputGrammar::Kind::kGbnf, R"(root ::= "yes" | "no")", false, true};
  auto c = g.constraint(p);
  std::vector<uint32_t> allowed;
  for (int32_t t : tokenizer().encode("Hmm, {maybe} not yes.", false)) {
    EXPECT_FALSE(c->next_allowed(allowed)) << "the reasoning is free";
    ASSERT_TRUE(c->accept(t));
  }
  for (int32_t t : tokenizer().encode("</think>", false)) ASSERT_TRUE(c->accept(t));
  ASSERT_TRUE(c->next_allowed(allowed)) << "the answer is masked";
  const int32_t yes = tokenizer().encode("yes", false)[0];
  const int32_t brace = tokenizer().encode("{", false)[0];
  EXPECT_TRUE(allowed_bit(allowed.data(), yes));
  EXPECT_FALSE(allowed_bit(allowed.data(), brace));
  for (int32_t t : tokenizer().encode("yes", false)) ASSERT_TRUE(c->accept(t));
  ASSERT_TRUE(c->next_allowed(allowed));
  EXPECT_TRUE(allowed_bit(allowed.data(), tokenizer().eos_id()));
  EXPECT_TRUE(c->accept(tokenizer().eos_id()));
  EXPECT_TRUE(c->complete());
  // without after_reasoning the same reasoning is refused at its first token
  p.grammar.after_reasoning = false;
  auto strict = g.constraint(p);
  EXPECT_FALSE(strict->accept(tokenizer().encode("Hmm", false)[0]));
}

TEST(StructuredOutput, UnsupportedSchemaFeaturesAreNamed) {
  GrammarEngine& g = *test::model_with_grammar("tiny-v3-chat").grammar;
  auto error = [&](const std::string& schema) {
    return test::error_of([&] { g.validate({OutputGrammar::Kind::kJsonSchema, schema, true}); });
  };
  EXPECT_NE(error(R"({"type": "object", "properties": {"a": {"not": {"type": "string"}}}})")
                .find("keyword \"not\" (at #/properties/a)"),
            std::string::npos);
  EXPECT_NE(error(R"({"type": "array", "uniqueItems": true})").find("\"uniqueItems\""),
            std::string::npos);
  EXPECT_NE(error(R"({"type": "string", "format": "credit-card"})").find("\"credit-card\""),
            std::string::npos);
  EXPECT_NE(error(R"({"type": "object", "if": {}, "then": {}})").find("\"if\""), std::string::npos);
  EXPECT_NE(error("[1, 2]").find("not an object or a boolean"), std::string::npos);
  EXPECT_NE(error("{not json").find("not valid JSON"), std::string::npos);
  // a bad grammar: xgrammar's own message, one line
  const std::string gbnf = test::error_of([&] {
    g.validate({OutputGrammar::Kind::kGbnf, "root ::= (", false});
  });
  EXPECT_NE(gbnf.find("structured output"), std::string::npos) << gbnf;
  // a schema that admits nothing (only refers to itself) is refused before any token
  EXPECT_NE(error(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})")
                .find("admits no answer"),
            std::string::npos);
  // and a supported schema compiles
  EXPECT_NO_THROW(g.validate({OutputGrammar::Kind::kJsonSchema, test_schemas()[2].dump(), true}));
}

}  // namespace
}  // namespace dsinfer::structured_output_test
