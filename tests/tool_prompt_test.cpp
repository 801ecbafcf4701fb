// Tools the model sees (chat/tool_prompt.h, chat/chat_formatter.h): DeepSeek-V3's and V3.1's
// templates write no tool list, so a request's tools go into the system prompt, with the call
// format each template uses for calls in the history (found by probing it); a prompt without
// tools is the template's own, byte for byte; a template that writes tools itself is left alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_formatter.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::tool_prompt_test {
namespace {

using json = nlohmann::json;

const Tokenizer& v3() {
  static const Tokenizer t = Tokenizer::load(test::data_path("tokenizer/deepseek-v3"));
  return t;
}

json weather_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather of a city.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])");
}

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

TEST(ToolPrompt, TheV3TemplatesCallFormatIsFoundAndTheToolsReachThePrompt) {
  const ChatFormatter chat(v3());
  EXPECT_FALSE(chat.renders_tools());
  ASSERT_TRUE(chat.tool_call_format().has_value());
  const ToolCallFormat& f = *chat.tool_call_format();
  EXPECT_EQ(f.calls_begin, "<｜tool▁calls▁begin｜>");
  EXPECT_EQ(f.call_begin, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>");
  EXPECT_EQ(f.name_to_arguments, "\n```json\n");
  EXPECT_EQ(f.call_end, "\n```<｜tool▁call▁end｜>");
  EXPECT_EQ(f.separator, "\n");
  EXPECT_EQ(f.calls_end, "<｜tool▁calls▁end｜>");
  const json messages =
      json::array({{{"role", "system"}, {"content", "Be brief."}}, user("Weather in Oslo?")});
  const std::string with = chat.render(messages, weather_tools(), json::object());
  for (
      const char* part :
      {"Be brief.\n\n## Tools\n", "### get_weather\nDescription: Current weather of a city.\n",
       R"(Parameters: {"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"})",
       "### get_time\n",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>tool_call_name\n```json\n"
       "tool_call_arguments\n```<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>",
       "<｜User｜>Weather in Oslo?<｜Assistant｜>"})
    EXPECT_NE(with.find(part), std::string::npos) << part << "\nin:\n" << with;
  // without tools: the template's own prompt, as generate renders it
  EXPECT_EQ(chat.render(messages, json(), json::object()), chat.render(messages));
  // no system message: the section becomes one, first
  const std::string alone = chat.render(json::array({user("Hi")}), weather_tools(), json::object());
  EXPECT_EQ(alone.find("<｜begin▁of▁sentence｜>## Tools\n"), 0u) << alone;
}

TEST(ToolPrompt, TheV31TemplateGetsItsOwnCallFormat) {
  const ChatFormatter chat(v3(),
                           test::read_file(test::data_path("chat_templates/deepseek-v3.1.jinja")));
  EXPECT_FALSE(chat.renders_tools());
  ASSERT_TRUE(chat.tool_call_format().has_value());
  const ToolCallFormat& f = *chat.tool_call_format();
  EXPECT_EQ(f.call_begin, "<｜tool▁call▁begin｜>");
  EXPECT_EQ(f.name_to_arguments, "<｜tool▁sep｜>");
  EXPECT_EQ(f.call_end, "<｜tool▁call▁end｜>");
  EXPECT_EQ(f.calls_end, "<｜tool▁calls▁end｜>");
  const std::string with = chat.render(json::array({user("Hi")}), weather_tools(), json::object());
  EXPECT_NE(with.find("<｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"),
            std::string::npos)
      << with;
}

TEST(ToolPrompt, ATemplateThatWritesToolsItselfIsLeftAlone) {
  const std::string own =
      "{{ bos_token }}{% if tools %}TOOLS={{ tools | tojson }}{% endif %}"
      "{% for m in messages %}<｜User｜>{{ m['content'] }}{% endfor %}<｜Assistant｜>";
  const ChatFormatter chat(v3(), own);
  EXPECT_TRUE(chat.renders_tools());
  const std::string with = chat.render(json::array({user("Hi")}), weather_tools(), json::object());
  EXPECT_EQ(with.find("## Tools"), std::string::npos) << with;
  EXPECT_NE(with.find("TOOLS=[{"), std::string::npos) << with;
  // and it writes no tool calls: nothing to enforce tool_choice with
  EXPECT_FALSE(chat.tool_call_format().has_value());
}

}  // namespace
}  // namespace dsinfer::tool_prompt_test
