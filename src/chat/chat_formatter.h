// Chat turns -> prompt token ids, as generate.py does it: tokenizer.apply_chat_template(messages,
// add_generation_prompt=True), i.e. the checkpoint's own template rendered with bos/eos tokens,
// then encoded without adding special tokens (the template writes BOS itself).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/tool_prompt.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer {

class ChatFormatter {
 public:
  // Throws Error when the tokenizer has no chat_template or the template does not parse.
  explicit ChatFormatter(const Tokenizer& tokenizer);
  // With `template_source` (--chat-template FILE) in place of the tokenizer's template, unless
  // empty (the same probes decide how tools are shown).
  ChatFormatter(const Tokenizer& tokenizer, const std::string& template_source);
  // messages: [{"role": "system"|"user"|"assistant", "content": "..."}, ...]
  std::string render(const nlohmann::json& messages, bool add_generation_prompt = true) const;
  std::vector<int32_t> prompt_ids(const nlohmann::json& messages) const;
  // The same with `tools` (a JSON array, or null) and extra template variables (e.g. V3.1's
  // {"thinking": true}; they cannot replace messages, tools or the special tokens).
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools,
                     const nlohmann::json& kwargs) const;
  const Tokenizer& tokenizer() const { return tokenizer_; }
  // Whether the template writes a request's tools into the prompt itself. DeepSeek-V3's, R1's
  // and V3.1's do not (V3.1's model card asks for them in the system prompt): for those, a
  // request's tools go into the system prompt as chat/tool_prompt.h writes them, in the call
  // format the template uses for the history, so the model sees them.
  bool renders_tools() const { return renders_tools_; }
  // How the template writes tool calls; nullopt when it writes none that can be told apart (then
  // tools are not described and tool_choice cannot be enforced).
  const std::optional<ToolCallFormat>& tool_call_format() const { return tool_call_format_; }

 private:
  const Tokenizer& tokenizer_;
  ChatTemplate template_;
  bool renders_tools_;
  std::optional<ToolCallFormat> tool_call_format_;
};

}  // namespace dsinfer
