#include "chat/chat_formatter.h"

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

}  // namespace

ChatFormatter::ChatFormatter(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), template_(checked_template(tokenizer)) {}

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
  nlohmann::json context = kwargs.is_object() ? kwargs : nlohmann::json::object();
  context["messages"] = messages;
  context["bos_token"] = tokenizer_.bos_token();
  context["eos_token"] = tokenizer_.eos_token();
  context["add_generation_prompt"] = true;
  context["tools"] = tools.is_array() && !tools.empty() ? tools : nlohmann::json(nullptr);
  context["documents"] = nullptr;
  return template_.render(context);
}

std::vector<int32_t> ChatFormatter::prompt_ids(const nlohmann::json& messages) const {
  return tokenizer_.encode(render(messages), /*add_special_tokens=*/false);
}

}  // namespace dsinfer
