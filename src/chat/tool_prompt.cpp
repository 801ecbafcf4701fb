#include "chat/tool_prompt.h"

#include "core/error.h"

namespace dsinfer {

std::string tool_prompt(const nlohmann::json& tools, const ToolCallFormat& f) {
  std::string out = "## Tools\nYou have access to the following tools:\n";
  for (const nlohmann::json& tool : tools) {
    const nlohmann::json& fn =
        tool.is_object() && tool.contains("function") ? tool["function"] : tool;
    check(fn.is_object() && fn.contains("name") && fn["name"].is_string(),
          "a tool has no function name");
    out += "\n### " + fn["name"].get<std::string>() + "\n";
    if (fn.contains("description") && fn["description"].is_string())
      out += "Description: " + fn["description"].get<std::string>() + "\n";
    if (fn.contains("parameters") && !fn["parameters"].is_null())
      out += "\nParameters: " + fn["parameters"].dump() + "\n";
  }
  out += "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n" + f.calls_begin +
         f.call_begin + "tool_call_name" + f.name_to_arguments + "tool_call_arguments" +
         f.call_end + "{{additional_tool_calls}}" + f.calls_end +
         "\n\nWhere:\n"
         "- `tool_call_name` must be an exact match to one of the available tools\n"
         "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters "
         "specification\n";
  out += f.separator.empty() ? "- For multiple tool calls, chain them directly without separators "
                               "or spaces\n"
                             : "- For multiple tool calls, put a line break between them\n";
  return out;
}

nlohmann::json with_tool_section(const nlohmann::json& messages, const std::string& section) {
  nlohmann::json out = messages;
  for (nlohmann::json& m : out)
    if (m.is_object() && m.value("role", "") == "system") {
      const nlohmann::json& content = m["content"];
      const std::string text = content.is_string() ? content.get<std::string>() : "";
      m["content"] = text.empty() ? section : text + "\n\n" + section;
      return out;
    }
  out.insert(out.begin(), nlohmann::json{{"role", "system"}, {"content", section}});
  return out;
}

}  // namespace dsinfer
