// serve/structured_output.h: which request field asks for which grammar, the 400s (naming the
// field) for bad shapes, conflicts and hostile input (a guided_json string nested 200k deep), the
// schema's text kept as the client wrote it, and tool_choice as a structural tag over a template's
// call format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve/request.h"
#include "serve/structured_output.h"

namespace dsinfer::serve_structured_output_test {
namespace {

using json = nlohmann::json;
using Kind = OutputGrammar::Kind;

// The param of the ApiError `body` gives ("" when none).
std::string refused(const json& body) {
  try {
    parse_output_grammar(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  }
  return "";
}

TEST(StructuredOutputFields, EachFieldGivesItsGrammar) {
  const json schema = {{"type", "object"}};
  EXPECT_EQ(parse_output_grammar(json::object()).grammar.kind, Kind::kNone);
  EXPECT_EQ(parse_output_grammar({{"response_format", {{"type", "text"}}}}).grammar.kind,
            Kind::kNone);
  auto g = parse_output_grammar({{"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(g.grammar.kind, Kind::kJsonObject);
  EXPECT_EQ(g.param, "response_format");
  g = parse_output_grammar(
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "n"}, {"schema", schema}, {"strict", true}}}}}});
  EXPECT_EQ(g.grammar.kind, Kind::kJsonSchema);
  EXPECT_TRUE(g.grammar.strict);
  EXPECT_EQ(g.param, "response_format.json_schema.schema");
  g = parse_output_grammar({{"response_format", {{"type", "json_object"}, {"schema", schema}}}});
  EXPECT_EQ(g.grammar.kind, Kind::kJsonSchema);
  EXPECT_FALSE(g.grammar.strict);
  EXPECT_EQ(parse_output_grammar({{"json_schema", schema}}).grammar.kind, Kind::kJsonSchema);
  EXPECT_EQ(parse_output_grammar({{"guided_json", schema.dump()}}).grammar.kind, Kind::kJsonSchema);
  EXPECT_EQ(parse_output_grammar({{"grammar", "root ::= \"a\""}}).grammar.kind, Kind::kGbnf);
  EXPECT_EQ(parse_output_grammar({{"guided_grammar", "root ::= \"a\""}}).grammar.kind, Kind::kGbnf);
  EXPECT_EQ(parse_output_grammar({{"guided_regex", "a+"}}).grammar.kind, Kind::kRegex);
}

TEST(StructuredOutputFields, BadShapesConflictsAndDeepStringsAre400sNamingTheField) {
  EXPECT_EQ(refused({{"response_format", "json"}}), "response_format");
  EXPECT_EQ(refused({{"response_format", {{"type", "xml"}}}}), "response_format.type");
  EXPECT_EQ(refused({{"response_format", {{"type", "json_schema"}}}}),
            "response_format.json_schema");
  EXPECT_EQ(refused({{"response_format",
                      {{"type", "json_schema"},
                       {"json_schema", {{"schema", {{"type", "object"}}}, {"strict", "yes"}}}}}}),
            "response_format.json_schema.strict");
  EXPECT_EQ(refused({{"json_schema", 5}}), "json_schema");
  EXPECT_EQ(refused({{"grammar", ""}}), "grammar");
  EXPECT_EQ(refused({{"guided_regex", 7}}), "guided_regex");
  EXPECT_EQ(refused({{"guided_json", "{not json"}}), "guided_json");
  EXPECT_EQ(refused({{"grammar", "root ::= \"a\""}, {"guided_regex", "a"}}), "guided_regex");
  // a string is parsed as a body is: 200k levels deep is a 400, not a stack overflow later
  const int depth = 200000;
  EXPECT_EQ(refused({{"guided_json", std::string(depth, '[') + std::string(depth, ']')}}),
            "guided_json");
}

TEST(StructuredOutputFields, TheSchemaKeepsTheClientsOrder) {
  const std::string body =
      R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema":
         {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}})";
  RequestedGrammar g = parse_output_grammar(json::parse(body));
  EXPECT_LT(g.grammar.text.find("alpha"), g.grammar.text.find("zeta"));  // nlohmann sorted it
  keep_schema_order(body, g.param, g.grammar);
  EXPECT_LT(g.grammar.text.find("zeta"), g.grammar.text.find("alpha"));
  EXPECT_EQ(json::parse(g.grammar.text),
            json::parse(body)["response_format"]["json_schema"]["schema"]);
  // guided_json as a string: its own text
  const std::string text = R"({"properties": {"b": {}, "a": {}}})";
  const std::string body2 = json{{"guided_json", text}}.dump();
  RequestedGrammar g2 = parse_output_grammar(json::parse(body2));
  keep_schema_order(body2, g2.param, g2.grammar);
  EXPECT_EQ(g2.grammar.text, text);
}

TEST(StructuredOutputFields, ToolChoiceIsAStructuralTagOverTheCallFormat) {
  const ToolCallFormat v3{"<｜tool▁calls▁begin｜>",
                          "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                          "\n```json\n",
                          "\n```<｜tool▁call▁end｜>",
                          "\n",
                          "<｜tool▁calls▁end｜>"};
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "g"}}])");
  EXPECT_EQ(tool_choice_grammar({{"tool_choice", "auto"}}, tools, v3).grammar.kind, Kind::kNone);
  EXPECT_EQ(tool_choice_grammar({{"tool_choice", "none"}}, tools, v3).grammar.kind, Kind::kNone);
  const auto required = tool_choice_grammar({{"tool_choice", "required"}}, tools, v3);
  ASSERT_EQ(required.grammar.kind, Kind::kStructuralTag);
  const json tag = json::parse(required.grammar.text);
  const json calls = tag["format"]["elements"][1];
  EXPECT_EQ(calls["tags"].size(), 2u);
  EXPECT_EQ(calls["tags"][0]["begin"], v3.call_begin + "f" + v3.name_to_arguments);
  EXPECT_FALSE(calls["stop_after_first"].get<bool>());
  const auto named = tool_choice_grammar(
      {{"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}, tools, v3);
  const json one = json::parse(named.grammar.text)["format"]["elements"][1];
  ASSERT_EQ(one["tags"].size(), 1u);
  EXPECT_EQ(one["tags"][0]["begin"], v3.call_begin + "g" + v3.name_to_arguments);
  EXPECT_TRUE(one["stop_after_first"].get<bool>());
  auto param_of = [&](const json& body, const json& t, std::optional<ToolCallFormat> f) {
    try {
      tool_choice_grammar(body, t, f);
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string();
  };
  const json named_h = {{"tool_choice", {{"type", "function"}, {"function", {{"name", "h"}}}}}};
  EXPECT_EQ(param_of(named_h, tools, v3), "tool_choice");
  EXPECT_EQ(param_of({{"tool_choice", "required"}}, json(), v3), "tool_choice");
  EXPECT_EQ(param_of({{"tool_choice", "required"}}, tools, std::nullopt), "tool_choice");
  EXPECT_EQ(param_of({{"tool_choice", "always"}}, tools, v3), "tool_choice");
  EXPECT_EQ(param_of({{"tool_choice", "required"}}, json::array({{{"type", "function"}}}), v3),
            "tools");
}

}  // namespace
}  // namespace dsinfer::serve_structured_output_test
