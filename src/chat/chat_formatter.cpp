#include "chat/chat_formatter.h"

#include "core/error.h"

namespace dsinfer {

namespace {
const std::string& checked_template(const Tokenizer& tokenizer) {
  check(!tokenizer.chat_template().empty(), "the tokenizer has no chat_template (tokenizer_config.json)");
  return tokenizer.chat_template();
}
}  // namespace

ChatFormatter::ChatFormatter(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), template_(checked_template(tokenizer)) {}

std::string ChatFormatter::render(const nlohmann::json& messages, bool add_generation_prompt) const {
  return apply_chat_template(template_, messages, tokenizer_.bos_token(), tokenizer_.eos_token(),
                             add_generation_prompt);
}

std::string ChatFormatter::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                  const nlohmann::json& kwargs) const {
  check(messages.is_array(), "messages must be an array");
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
