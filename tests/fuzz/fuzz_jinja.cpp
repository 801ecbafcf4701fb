// The chat template interpreter. First byte even: a template of strangers (up to a NUL) rendered
// with a JSON context (after it; DeepSeek-style messages when there is none). Odd: one of the
// real DeepSeek templates (V3 tokenizer_config.json, tests/data/chat_templates) rendered with
// fuzzed messages, as the server and generate do. Templates are bounded (output, loops, depth,
// work): any input ends.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_support.h"

using namespace dsinfer;
using json = nlohmann::json;

namespace {

const std::vector<ChatTemplate>& real_templates() {
  static const std::vector<ChatTemplate> templates = [] {
    std::vector<ChatTemplate> out;
    // V3's own, from its tokenizer_config.json, then the others of tests/data/chat_templates
    out.emplace_back(json::parse(fuzz::read_data_file(
        "tokenizer/deepseek-v3/tokenizer_config.json"))["chat_template"]
                         .get<std::string>());
    for (const char* name : {"deepseek-v3.1.jinja", "deepseek-r1.jinja", "deepseek-v2.jinja",
                             "deepseek-r1-distill-qwen-32b.jinja"})
      out.emplace_back(fuzz::read_data_file(std::string("chat_templates/") + name));
    return out;
  }();
  return templates;
}

json default_context() {
  return {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                    {{"role", "user"}, {"content", "Hi"}},
                                    {{"role", "assistant"}, {"content", "Hello"}},
                                    {{"role", "user"}, {"content", "2+2?"}}})},
          {"bos_token", "<｜begin▁of▁sentence｜>"},
          {"eos_token", "<｜end▁of▁sentence｜>"},
          {"add_generation_prompt", true}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input = fuzz::as_text(data + 1, size - 1);
  try {
    if ((data[0] & 1) == 0) {
      const auto [source, context_text] = fuzz::split_at_nul(input);
      const ChatTemplate t{std::string(source)};
      json context = default_context();
      if (!context_text.empty()) {
        context = json::parse(context_text, nullptr, /*allow_exceptions=*/false);
        if (!context.is_object()) return 0;
      }
      (void)t.render(context);
    } else {
      const std::vector<ChatTemplate>& templates = real_templates();
      const ChatTemplate& t = templates[(data[0] >> 1) % templates.size()];
      const json messages = json::parse(input, nullptr, /*allow_exceptions=*/false);
      if (messages.is_discarded()) return 0;
      (void)apply_chat_template(t, messages, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                true);
    }
  } catch (const Error&) {
  }
  return 0;
}
