// Chat turns -> prompt token ids, as generate.py does it: tokenizer.apply_chat_template(messages,
// add_generation_prompt=True), i.e. the checkpoint's own template rendered with bos/eos tokens,
// then encoded without adding special tokens (the template writes BOS itself).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer {

class ChatFormatter {
 public:
  // Throws Error when the tokenizer has no chat_template or the template does not parse.
  explicit ChatFormatter(const Tokenizer& tokenizer);
  // messages: [{"role": "system"|"user"|"assistant", "content": "..."}, ...]
  std::string render(const nlohmann::json& messages, bool add_generation_prompt = true) const;
  std::vector<int32_t> prompt_ids(const nlohmann::json& messages) const;
  // The same with `tools` (a JSON array, or null) and extra template variables (e.g. V3.1's
  // {"thinking": true}; they cannot replace messages, tools or the special tokens).
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools,
                     const nlohmann::json& kwargs) const;
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const Tokenizer& tokenizer_;
  ChatTemplate template_;
};

}  // namespace dsinfer
