#include "chat/chat_formatter.h"

#include "chat/deepseek_output.h"
#include "core/error.h"

namespace dsinfer {

namespace {
const std::string& checked_template(const Tokenizer& tokenizer) {
  check(!tokenizer.chat_template().empty(),
        "the tokenizer has no chat_template: the checkpoint's tokenizer_config.json is missing "
        "beside tokenizer.json, or holds none (dsinfer convert copies it from the Hugging Face "
        "checkpoint)");
  return tokenizer.chat_template();
}
// Bytes of text in the messages' string fields (content, reasoning, tool arguments; a few levels
// deep, which is all a message has): the rendered prompt holds at least these.
size_t text_bytes(const nlohmann::json& v, int depth) {
  if (v.is_string()) return v.get_ref<const std::string&>().size();
  if (depth == 0 || !v.is_structured()) return 0;
  size_t n = 0;
  for (const auto& item : v) n += text_bytes(item, depth - 1);
  return n;
}

// A conversation too long for the template's output limit fails here, as what it is, rather
// than as an error at some line of the chat template.
void check_prompt_size(const nlohmann::json& messages) {
  const size_t limit = ChatTemplate::Limits{}.max_output_bytes;
  const size_t n = text_bytes(messages, 4);
  check(n <= limit, "the prompt is too long: its messages hold ", n,
        " bytes of text, more than the ", limit, " bytes (1 MiB) a rendered prompt may have");
}

// Renders `messages` with `tools` through `t` (the context every chat template expects).
std::string render_with(const ChatTemplate& t, const Tokenizer& tokenizer,
                        const nlohmann::json& messages, const nlohmann::json& tools,
                        const nlohmann::json& kwargs) {
  nlohmann::json context = kwargs.is_object() ? kwargs : nlohmann::json::object();
  context["messages"] = messages;
  context["bos_token"] = tokenizer.bos_token();
  context["eos_token"] = tokenizer.eos_token();
  context["add_generation_prompt"] = true;
  context["tools"] = tools.is_array() && !tools.empty() ? tools : nlohmann::json(nullptr);
  context["documents"] = nullptr;
  return t.render(context);
}

const char kProbeName[] = "dsinfer_probe_function";
const char kProbeOther[] = "dsinfer_probe_other";

nlohmann::json probe_tools() {
  return nlohmann::json::parse(R"([{"type": "function", "function": {"name": ")" +
                               std::string(kProbeName) +
                               R"(", "description": "probe", "parameters": {"type": "object"}}}])");
}

// Whether `t` writes a request's tool list into the prompt (a template that fails on the probe
// counts as not writing it).
bool template_renders_tools(const ChatTemplate& t, const Tokenizer& tokenizer) {
  try {
    const nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
    return render_with(t, tokenizer, messages, probe_tools(), nullptr).find(kProbeName) !=
           std::string::npos;
  } catch (const Error&) {
    return false;
  }
}

// The tool-call format of `t`, from an assistant turn with two calls (with one, DeepSeek-V3's
// template writes no closer).
std::optional<ToolCallFormat> probe_tool_call_format(const ChatTemplate& t,
                                                     const Tokenizer& tokenizer) {
  const std::string args = R"({"dsinfer_probe_argument": 1})";
  auto call = [&](const char* name) {
    return nlohmann::json{{"id", std::string("call_") + name},
                          {"type", "function"},
                          {"function", {{"name", name}, {"arguments", args}}}};
  };
  const nlohmann::json messages = {
      {{"role", "user"}, {"content", "hi"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", {call(kProbeName), call(kProbeOther)}}},
      {{"role", "tool"}, {"tool_call_id", "call_x"}, {"content", "result"}}};
  std::string text;
  try {
    text = render_with(t, tokenizer, messages, probe_tools(), nullptr);
  } catch (const Error&) {
    return std::nullopt;
  }
  // ... calls_begin call_begin NAME name_to_arguments ARGS call_end separator call_begin OTHER ...
  const size_t name1 = text.find(kProbeName), args1 = text.find(args, name1);
  const size_t name2 = text.find(kProbeOther, args1), args2 = text.find(args, name2);
  if (name1 == std::string::npos || args1 == std::string::npos || name2 == std::string::npos ||
      args2 == std::string::npos)
    return std::nullopt;
  ToolCallFormat f;
  f.name_to_arguments =
      text.substr(name1 + sizeof kProbeName - 1, args1 - name1 - (sizeof kProbeName - 1));
  // between the first call's arguments and the second's name: call_end, separator, call_begin
  const std::string between = text.substr(args1 + args.size(), name2 - args1 - args.size());
  const std::string begin_marker(kToolCallBegin), end_marker(kToolCallEnd);
  const size_t end_at = between.find(end_marker), begin_at = between.rfind(begin_marker);
  if (end_at == std::string::npos || begin_at == std::string::npos || begin_at < end_at)
    return std::nullopt;
  f.call_end = between.substr(0, end_at + end_marker.size());
  f.separator = between.substr(end_at + end_marker.size(), begin_at - end_at - end_marker.size());
  f.call_begin = between.substr(begin_at);
  // before the first call: calls_begin then call_begin
  const std::string before = text.substr(0, name1);
  if (before.size() < f.call_begin.size() ||
      before.compare(before.size() - f.call_begin.size(), f.call_begin.size(), f.call_begin) != 0)
    return std::nullopt;
  const size_t calls_at = before.rfind(kToolCallsBegin);
  if (calls_at == std::string::npos) return std::nullopt;
  f.calls_begin = before.substr(calls_at, before.size() - f.call_begin.size() - calls_at);
  // after the second call: calls_end (up to the end-of-sentence token or the tool outputs)
  const std::string after = text.substr(args2 + args.size());
  if (after.compare(0, f.call_end.size(), f.call_end) != 0) return std::nullopt;
  const size_t closer_at = after.find(kToolCallsEnd);
  if (closer_at == std::string::npos) return std::nullopt;
  f.calls_end =
      after.substr(f.call_end.size(), closer_at + kToolCallsEnd.size() - f.call_end.size());
  return f;
}

}  // namespace

ChatFormatter::ChatFormatter(const Tokenizer& tokenizer) : ChatFormatter(tokenizer, "") {}

ChatFormatter::ChatFormatter(const Tokenizer& tokenizer, const std::string& template_source)
    : tokenizer_(tokenizer),
      template_(template_source.empty() ? checked_template(tokenizer) : template_source),
      renders_tools_(template_renders_tools(template_, tokenizer_)),
      tool_call_format_(probe_tool_call_format(template_, tokenizer_)) {}

std::string ChatFormatter::render(const nlohmann::json& messages,
                                  bool add_generation_prompt) const {
  check_prompt_size(messages);
  return apply_chat_template(template_, messages, tokenizer_.bos_token(), tokenizer_.eos_token(),
                             add_generation_prompt);
}

std::string ChatFormatter::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                  const nlohmann::json& kwargs) const {
  check(messages.is_array(), "messages must be an array");
  check_prompt_size(messages);
  const bool has_tools = tools.is_array() && !tools.empty();
  if (has_tools && !renders_tools_ && tool_call_format_)  // the template would drop them
    return render_with(template_, tokenizer_,
                       with_tool_section(messages, tool_prompt(tools, *tool_call_format_)), tools,
                       kwargs);
  return render_with(template_, tokenizer_, messages, tools, kwargs);
}

std::vector<int32_t> ChatFormatter::prompt_ids(const nlohmann::json& messages) const {
  return tokenizer_.encode(render(messages), /*add_special_tokens=*/false);
}

}  // namespace dsinfer
