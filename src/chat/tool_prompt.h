// A request's tools as the model reads them when its chat template does not write them: a
// "## Tools" section for the system prompt in the shape DeepSeek documents for function calling
// (each function's name, description and parameters as JSON Schema, then the exact call format),
// with the call format the checkpoint's own template uses for tool calls in the history, so the
// calls the model writes are the ones chat/deepseek_output.h parses (V3's
// function<｜tool▁sep｜>NAME + fenced JSON, V3.1's NAME<｜tool▁sep｜>JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dsinfer {

// How a template writes an assistant's tool calls (ChatFormatter finds it by rendering two probe
// calls): the section is calls_begin, then each call as call_begin + NAME + name_to_arguments +
// ARGUMENTS + call_end, `separator` between calls, then calls_end. DeepSeek-V3's:
// <｜tool▁calls▁begin｜>, <｜tool▁call▁begin｜>function<｜tool▁sep｜>, "\n```json\n",
// "\n```<｜tool▁call▁end｜>", "\n", <｜tool▁calls▁end｜>; V3.1's: NAME<｜tool▁sep｜>ARGUMENTS, no
// fence, no separator.
struct ToolCallFormat {
  std::string calls_begin, call_begin, name_to_arguments, call_end, separator, calls_end;
};

// The section for `tools` (OpenAI's list: {"type": "function", "function": {name, description,
// parameters}}). An Error for a tool without a function name.
std::string tool_prompt(const nlohmann::json& tools, const ToolCallFormat& format);

// `messages` with `section` after the first system message's content (a blank line between), or
// as a new first system message when there is none.
nlohmann::json with_tool_section(const nlohmann::json& messages, const std::string& section);

}  // namespace dsinfer
