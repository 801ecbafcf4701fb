// Chat templates of the DeepSeek family rendered as transformers renders them.
// V3 and V2: the exact strings of shared/tokenizers/README.md (rendered there with jinja2 and
// transformers' settings). R1 (and its distills) and V3.1: expectations written from the
// templates' own text (and checked against jinja2 3.1.6 when they were written).
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::chat_template_test {
namespace {

using json = nlohmann::json;
using test::data_path;
using test::read_file;

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

std::string v3_template() {
  json config = json::parse(read_file(data_path("tokenizer/deepseek-v3/tokenizer_config.json")));
  return config["chat_template"].get<std::string>();
}

std::string stored(const std::string& name) {
  return read_file(data_path("chat_templates/" + name));
}

std::string render(const ChatTemplate& t, const std::string& messages,
                   bool add_generation_prompt = true) {
  return apply_chat_template(t, json::parse(messages), kBos, kEos, add_generation_prompt);
}

std::string render_with(const ChatTemplate& t, const std::string& messages, json extra,
                        bool agp = true) {
  extra["messages"] = json::parse(messages);
  extra["bos_token"] = kBos;
  extra["eos_token"] = kEos;
  extra["add_generation_prompt"] = agp;
  return t.render(extra);
}

// Conversations shared by the tests below.
const char* kHi = R"([{"role": "user", "content": "Hi"}])";
const char* kSysHi = R"([{"role": "system", "content": "SYS"}, {"role": "user", "content": "Hi"}])";
const char* kMultiTurn =
    R"([{"role": "system", "content": "SYS"}, {"role": "user", "content": "U1"},
                             {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}])";
const char* kThinkTurn =
    R"([{"role": "system", "content": "SYS"}, {"role": "user", "content": "U1"},
                             {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
                             {"role": "user", "content": "U2"}])";
const char* kTwoSystems =
    R"([{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
                              {"role": "user", "content": "U"}])";
const char* kOneCallTwoResults = R"([{"role": "user", "content": "Q"},
  {"role": "assistant", "content": null,
   "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
  {"role": "tool", "content": "R1"}, {"role": "tool", "content": "R2"},
  {"role": "assistant", "content": "ANS"}])";
const char* kTwoCallsTwoResults = R"([{"role": "user", "content": "Q"},
  {"role": "assistant", "content": null,
   "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                  {"type": "function", "function": {"name": "g", "arguments": "{}"}}]},
  {"role": "tool", "content": "R1"}, {"role": "tool", "content": "R2"},
  {"role": "assistant", "content": "ANS"}])";
const char* kTwoCallsEndingWithTool = R"([{"role": "user", "content": "Q"},
  {"role": "assistant", "content": null,
   "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                  {"type": "function", "function": {"name": "g", "arguments": "{}"}}]},
  {"role": "tool", "content": "R1"}, {"role": "tool", "content": "R2"}])";

// --- DeepSeek-V3 (tests/data/tokenizer/deepseek-v3/tokenizer_config.json) ---

TEST(ChatTemplateV3, SingleTurnWithGenerationPrompt) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kHi), "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
}

TEST(ChatTemplateV3, SingleTurnWithoutGenerationPrompt) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kHi, false), "<｜begin▁of▁sentence｜><｜User｜>Hi");
}

TEST(ChatTemplateV3, SystemPromptFollowsBos) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kSysHi), "<｜begin▁of▁sentence｜>SYS<｜User｜>Hi<｜Assistant｜>");
}

TEST(ChatTemplateV3, MultiTurn) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kMultiTurn),
            "<｜begin▁of▁sentence｜>SYS<｜User｜>U1<｜Assistant｜>A1<｜end▁of▁sentence｜><｜User｜>"
            "U2<｜Assistant｜>");
}

TEST(ChatTemplateV3, SystemMessagesJoinedWithBlankLine) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kTwoSystems), "<｜begin▁of▁sentence｜>S1\n\nS2<｜User｜>U<｜Assistant｜>");
}

TEST(ChatTemplateV3, ToolCallAndResults) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kOneCallTwoResults),
            "<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜><｜tool▁calls▁begin｜><"
            "｜tool▁call▁begin｜>function"
            "<｜tool▁sep｜>f\n```json\n{\"a\":1}\n```<｜tool▁call▁end｜><｜tool▁outputs▁begin｜><"
            "｜tool▁output▁begin｜>R1"
            "<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>R2<｜tool▁output▁end｜><"
            "｜tool▁outputs▁end｜>ANS"
            "<｜end▁of▁sentence｜><｜Assistant｜>");
}

TEST(ChatTemplateV3, SecondToolCallGetsTheClosingPair) {
  ChatTemplate t(v3_template());
  EXPECT_EQ(render(t, kTwoCallsTwoResults),
            "<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜><｜tool▁calls▁begin｜><"
            "｜tool▁call▁begin｜>function"
            "<｜tool▁sep｜>f\n```json\n{\"a\":1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
            "function<｜tool▁sep｜>g\n"
            "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><"
            "｜tool▁outputs▁begin｜>"
            "<｜tool▁output▁begin｜>R1<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>R2<"
            "｜tool▁output▁end｜>"
            "<｜tool▁outputs▁end｜>ANS<｜end▁of▁sentence｜><｜Assistant｜>");
}

TEST(ChatTemplateV3, NoGenerationPromptAfterToolMessage) {
  ChatTemplate t(v3_template());
  const std::string out = render(t, kTwoCallsEndingWithTool);
  const std::string tail = "<｜tool▁output▁begin｜>R2<｜tool▁output▁end｜><｜tool▁outputs▁end｜>";
  ASSERT_GE(out.size(), tail.size());
  EXPECT_EQ(out.substr(out.size() - tail.size()), tail);
}

TEST(ChatTemplateV3, TemplateDefaultsAddGenerationPromptWhenUndefined) {
  ChatTemplate t(v3_template());
  json ctx = {{"messages", json::parse(kHi)}, {"bos_token", kBos}};
  EXPECT_EQ(t.render(ctx), "<｜begin▁of▁sentence｜><｜User｜>Hi");
}

// --- DeepSeek-V2 / V2-Lite (tests/data/chat_templates/deepseek-v2.jinja) ---

TEST(ChatTemplateV2, SingleTurn) {
  ChatTemplate t(stored("deepseek-v2.jinja"));
  EXPECT_EQ(render(t, kHi), "<｜begin▁of▁sentence｜>User: Hi\n\nAssistant:");
  EXPECT_EQ(render(t, kHi, false), "<｜begin▁of▁sentence｜>User: Hi\n\n");
}

TEST(ChatTemplateV2, MultiTurnWithSystem) {
  ChatTemplate t(stored("deepseek-v2.jinja"));
  EXPECT_EQ(render(t, kMultiTurn),
            "<｜begin▁of▁sentence｜>SYS\n\nUser: U1\n\nAssistant: A1<｜end▁of▁sentence｜>User: "
            "U2\n\nAssistant:");
}

TEST(ChatTemplateV2, ToolMessagesAreIgnoredAndNullContentRaises) {
  ChatTemplate t(stored("deepseek-v2.jinja"));
  // 'Assistant: ' + None raises in Python, so it must raise here too.
  try {
    render(t, kOneCallTwoResults);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can only concatenate str (not \"NoneType\") to str"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(render(t, R"([{"role": "user", "content": "Q"}, {"role": "tool", "content": "R"}])"),
            "<｜begin▁of▁sentence｜>User: Q\n\nAssistant:");
}

// --- DeepSeek-R1 (deepseek-r1.jinja) and the R1 distills ---

class ChatTemplateR1 : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateR1, GenerationPromptOpensThinking) {
  ChatTemplate t(stored(GetParam()));
  EXPECT_EQ(render(t, kHi), kBos + "<｜User｜>Hi<｜Assistant｜><think>\n");
  EXPECT_EQ(render(t, kHi, false), kBos + "<｜User｜>Hi");
}

TEST_P(ChatTemplateR1, EarlierReasoningIsDropped) {
  ChatTemplate t(stored(GetParam()));
  // content.split('</think>')[-1] keeps what follows the last </think>.
  EXPECT_EQ(render(t, kThinkTurn), kBos + "SYS<｜User｜>U1<｜Assistant｜>\n\nA1" + kEos +
                                       "<｜User｜>U2<｜Assistant｜><think>\n");
  EXPECT_EQ(
      render(
          t,
          R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "a</think>b</think>c"}])",
          false),
      kBos + "<｜User｜>U<｜Assistant｜>c" + kEos);
}

TEST_P(ChatTemplateR1, LastSystemMessageWins) {
  ChatTemplate t(stored(GetParam()));
  EXPECT_EQ(render(t, kTwoSystems), kBos + "S2<｜User｜>U<｜Assistant｜><think>\n");
}

TEST_P(ChatTemplateR1, ToolCalls) {
  ChatTemplate t(stored(GetParam()));
  const std::string calls =
      "<｜User｜>Q<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "f\n```json\n"
      "{\"a\":1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{}"
      "\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>" +
      kEos +
      "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>R1<｜tool▁output▁end｜>\n<"
      "｜tool▁output▁begin｜>R2"
      "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>";
  EXPECT_EQ(render(t, kTwoCallsTwoResults),
            kBos + calls + "ANS" + kEos + "<｜Assistant｜><think>\n");
  EXPECT_EQ(render(t, kTwoCallsEndingWithTool), kBos + calls);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateR1,
                         ::testing::Values("deepseek-r1.jinja",
                                           "deepseek-r1-distill-qwen-32b.jinja",
                                           "deepseek-r1-distill-llama-8b.jinja"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 6);
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

TEST(ChatTemplateR1Distill, CrlfSourceRendersLikeLf) {
  // The Llama-8B distill's stored copy has CRLF line endings; jinja2 reads them as LF.
  const std::string crlf = stored("deepseek-r1-distill-llama-8b.jinja");
  ASSERT_NE(crlf.find("\r\n"), std::string::npos);
  std::string lf;
  for (char c : crlf)
    if (c != '\r') lf += c;
  ChatTemplate a(crlf), b(lf);
  EXPECT_EQ(render(a, kTwoCallsTwoResults), render(b, kTwoCallsTwoResults));
  EXPECT_EQ(render(a, kThinkTurn), render(b, kThinkTurn));
}

// --- DeepSeek-V3.1 (deepseek-v3.1.jinja) ---

TEST(ChatTemplateV31, ThinkingSwitch) {
  ChatTemplate t(stored("deepseek-v3.1.jinja"));
  EXPECT_EQ(render(t, kHi), kBos + "<｜User｜>Hi<｜Assistant｜></think>");
  EXPECT_EQ(render_with(t, kHi, {{"thinking", true}}), kBos + "<｜User｜>Hi<｜Assistant｜><think>");
  EXPECT_EQ(render_with(t, kHi, {{"enable_thinking", true}}),
            kBos + "<｜User｜>Hi<｜Assistant｜><think>");
  EXPECT_EQ(render_with(t, kHi, {{"thinking", false}, {"enable_thinking", true}}),
            kBos + "<｜User｜>Hi<｜Assistant｜></think>");
  EXPECT_EQ(render(t, kHi, false), kBos + "<｜User｜>Hi");
}

TEST(ChatTemplateV31, MultiTurnDropsReasoning) {
  ChatTemplate t(stored("deepseek-v3.1.jinja"));
  // Each assistant turn after a user turn opens with </think>; content.split('</think>', 1)[1].
  EXPECT_EQ(render(t, kThinkTurn), kBos + "SYS<｜User｜>U1<｜Assistant｜></think>\n\nA1" + kEos +
                                       "<｜User｜>U2<｜Assistant｜></think>");
  EXPECT_EQ(render_with(t, kThinkTurn, {{"thinking", true}}),
            kBos + "SYS<｜User｜>U1<｜Assistant｜></think>\n\nA1" + kEos +
                "<｜User｜>U2<｜Assistant｜><think>");
  EXPECT_EQ(render(t, kTwoSystems), kBos + "S1\n\nS2<｜User｜>U<｜Assistant｜></think>");
  // Only the first </think> splits (R1 keeps what follows the last one).
  EXPECT_EQ(
      render(
          t,
          R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "x</think>y</think>z"}])",
          false),
      kBos + "<｜User｜>U<｜Assistant｜></think>y</think>z" + kEos);
}

TEST(ChatTemplateV31, ToolCalls) {
  ChatTemplate t(stored("deepseek-v3.1.jinja"));
  const char* conv = R"([{"role": "user", "content": "Q"},
    {"role": "assistant", "content": null,
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                    {"type": "function", "function": {"name": "g", "arguments": "{}"}}]},
    {"role": "tool", "content": "R1"}, {"role": "tool", "content": "R2"},
    {"role": "assistant", "content": "ANS"}, {"role": "user", "content": "Q2"}])";
  EXPECT_EQ(
      render(t, conv),
      kBos +
          "<｜User｜>Q<｜Assistant｜></"
          "think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
          "{\"a\":1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
          "<｜tool▁calls▁end｜>" +
          kEos +
          "<｜tool▁output▁begin｜>R1<｜tool▁output▁end｜><｜tool▁output▁begin｜>R2<"
          "｜tool▁output▁end｜>ANS" +
          kEos + "<｜User｜>Q2<｜Assistant｜></think>");
  // Content before the calls is kept; a trailing tool result gets no generation prompt.
  EXPECT_EQ(
      render(t, R"([{"role": "user", "content": "Q"},
    {"role": "assistant", "content": "Checking.",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "content": "R"}])"),
      kBos +
          "<｜User｜>Q<｜Assistant｜></think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f"
          "<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>" +
          kEos + "<｜tool▁output▁begin｜>R<｜tool▁output▁end｜>");
}

TEST(ChatTemplateV31, PrefixAssistantMessageKeepsThinkingOpen) {
  ChatTemplate t(stored("deepseek-v3.1.jinja"));
  EXPECT_EQ(render_with(t, R"([{"role": "user", "content": "Q"},
                               {"role": "assistant", "content": "<think>", "prefix": true}])",
                        {{"thinking", true}}, false),
            kBos + "<｜User｜>Q<｜Assistant｜><think><think>" + kEos);
}

// --- apply_chat_template's context ---

TEST(ApplyChatTemplate, PassesToolsAndDocumentsAsNone) {
  ChatTemplate t(
      "{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ bos_token }}{{ "
      "eos_token }}"
      " {{ add_generation_prompt }} {{ messages|length }}");
  EXPECT_EQ(apply_chat_template(t, json::parse(kSysHi), "<s>", "</s>", true),
            "True True True <s></s> True 2");
}

TEST(ApplyChatTemplate, RejectsNonArrayMessages) {
  ChatTemplate t("x");
  EXPECT_THROW(apply_chat_template(t, json::object(), "<s>", "</s>", true), Error);
}

}  // namespace
}  // namespace dsinfer::chat_template_test
