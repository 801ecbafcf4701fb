// chat/deepseek_output.h: reasoning and tool calls split out of DeepSeek's output as the server
// will stream it. Every case is checked whole and streamed byte by byte (the same totals, and no
// marker ever leaks in part into a delta); malformed tool sections stay content.
#include "chat/deepseek_output.h"

#include <gtest/gtest.h>

namespace dsinfer::deepseek_output_test {
namespace {

const std::string kBegin = "<｜tool▁calls▁begin｜>", kEnd = "<｜tool▁calls▁end｜>",
                  kCall = "<｜tool▁call▁begin｜>", kCallEnd = "<｜tool▁call▁end｜>",
                  kSep = "<｜tool▁sep｜>";

struct Totals {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  bool made_calls = false;
};

void add(Totals& t, const OutputDelta& d) {
  t.reasoning += d.reasoning;
  t.content += d.content;
  for (const ToolCall& c : d.tool_calls) t.calls.push_back(c);
}

Totals whole(const std::string& text, OutputParserOptions o = {}) {
  DeepSeekOutputParser p(o);
  Totals t;
  add(t, p.push(text));
  add(t, p.finish());
  t.made_calls = p.made_tool_calls();
  return t;
}

// Byte by byte; no delta may hold part of a marker (a marker's bytes come out whole or not at all).
Totals streamed(const std::string& text, OutputParserOptions o = {}) {
  DeepSeekOutputParser p(o);
  Totals t;
  for (size_t i = 0; i < text.size(); ++i) {
    const OutputDelta d = p.push(text.substr(i, 1));
    for (const std::string* s : {&d.reasoning, &d.content}) {
      // a lone piece of a multi-byte marker character would show up as its lead bytes
      EXPECT_EQ(s->find("<｜tool▁calls"), s->find("<｜tool▁calls▁begin｜>")) << *s;
      EXPECT_EQ(s->find("</thi"), s->find("</think>")) << *s;
    }
    add(t, d);
  }
  add(t, p.finish());
  t.made_calls = p.made_tool_calls();
  return t;
}

void expect_same(const Totals& a, const Totals& b) {
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
  }
  EXPECT_EQ(a.made_calls, b.made_calls);
}

Totals both(const std::string& text, OutputParserOptions o = {}) {
  const Totals a = whole(text, o), b = streamed(text, o);
  expect_same(a, b);
  return a;
}

TEST(DeepSeekOutput, ReasoningThatStartsInsideThink) {
  OutputParserOptions r1;
  r1.starts_in_reasoning = true;
  const Totals t = both("Let me think.\n</think>\n\nThe answer is 4.", r1);
  EXPECT_EQ(t.reasoning, "Let me think.\n");
  EXPECT_EQ(t.content, "\n\nThe answer is 4.");
}

TEST(DeepSeekOutput, AnExplicitThinkAtTheStartOpensReasoning) {
  const Totals t = both("\n<think>hmm</think>Yes.");
  EXPECT_EQ(t.reasoning, "hmm");
  EXPECT_EQ(t.content, "Yes.");
  // later in the text it is only text
  EXPECT_EQ(both("Say <think> please").content, "Say <think> please");
}

TEST(DeepSeekOutput, UnclosedReasoningStaysReasoningAndPlainTextIsContent) {
  OutputParserOptions r1;
  r1.starts_in_reasoning = true;
  const Totals t = both("thinking and thinking </thi", r1);
  EXPECT_EQ(t.reasoning, "thinking and thinking </thi");
  EXPECT_EQ(t.content, "");
  const Totals plain = both("Hello <｜tool▁cal");  // a cut-short marker at the end is text
  EXPECT_EQ(plain.content, "Hello <｜tool▁cal");
  EXPECT_EQ(plain.reasoning, "");
}

TEST(DeepSeekOutput, V3ToolCallsBecomeCalls) {
  const std::string text = "Checking." + kBegin + kCall + "function" + kSep +
                           "get_weather\n```json\n{\"location\": \"Tokyo\"}\n```" + kCallEnd +
                           "\n" + kCall + "function" + kSep + "get_time\n```json\n{}\n```" +
                           kCallEnd + kEnd;
  const Totals t = both(text);
  EXPECT_EQ(t.content, "Checking.");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(t.calls[0].arguments, R"({"location":"Tokyo"})");
  EXPECT_EQ(t.calls[1].name, "get_time");
  EXPECT_EQ(t.calls[1].arguments, "{}");
  EXPECT_TRUE(t.made_calls);
}

TEST(DeepSeekOutput, V31ToolCallsAndAMisspelledOpener) {
  const Totals t =
      both(kBegin + kCall + "search" + kSep + "{\"q\": \"dsinfer\", \"n\": 3}" + kCallEnd + kEnd);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "search");
  EXPECT_EQ(t.calls[0].arguments, R"({"n":3,"q":"dsinfer"})");
  const Totals distill =
      both("<｜tool_calls_begin｜>" + kCall + "f" + kSep + "{}" + kCallEnd + kEnd);
  ASSERT_EQ(distill.calls.size(), 1u);
  EXPECT_EQ(distill.calls[0].name, "f");
}

TEST(DeepSeekOutput, MalformedOrCutShortToolSectionsStayContent) {
  const std::string bad_json = kBegin + kCall + "f" + kSep + "{not json" + kCallEnd + kEnd;
  Totals t = both(bad_json);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_FALSE(t.made_calls);
  EXPECT_EQ(t.content, bad_json);
  const std::string empty = kBegin + kEnd;
  t = both(empty);
  EXPECT_TRUE(t.calls.empty()) << "never an empty tool_calls list";
  EXPECT_EQ(t.content, empty);
  const std::string cut = "ok " + kBegin + kCall + "f" + kSep + "{\"a\": 1}";  // max_tokens hit
  t = both(cut);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, cut);
  // tools not asked for: the markers are text
  OutputParserOptions no_tools;
  no_tools.parse_tool_calls = false;
  const std::string fine = kBegin + kCall + "f" + kSep + "{}" + kCallEnd + kEnd;
  EXPECT_EQ(both(fine, no_tools).content, fine);
}

TEST(DeepSeekOutput, ParseToolCallRejectsWhatIsNotACall) {
  ToolCall c;
  EXPECT_FALSE(parse_tool_call("no separator", c));
  EXPECT_FALSE(parse_tool_call("function" + kSep + "f\n```json\n[1, 2]\n```", c))
      << "arguments must be an object";
  EXPECT_FALSE(parse_tool_call("method" + kSep + "f\n```json\n{}\n```", c));
  EXPECT_FALSE(parse_tool_call("two words" + kSep + "{}", c));
  EXPECT_TRUE(parse_tool_call("function" + kSep + "f\n```json\n{\"x\": [1]}\n```\n", c));
  EXPECT_EQ(c.arguments, R"({"x":[1]})");
}

}  // namespace
}  // namespace dsinfer::deepseek_output_test
