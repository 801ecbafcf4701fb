// ChatTemplate: parse once, render many times (see chat_template.h).
#include "chat/chat_template.h"

#include "core/error.h"
#include "jinja/eval.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace dsinfer {

struct ChatTemplate::Impl {
  std::string source;  // normalised
  jinja::Body body;
  Limits limits;
};

ChatTemplate::ChatTemplate(const std::string& source) : ChatTemplate(source, Limits{}) {}

ChatTemplate::ChatTemplate(const std::string& source, const Limits& limits)
    : impl_(std::make_unique<Impl>()) {
  check(limits.max_depth > 0 && limits.max_output_bytes > 0,
        "chat template: limits must be positive");
  impl_->limits = limits;
  impl_->source = jinja::normalize_source(source);
  try {
    impl_->body = jinja::parse_template(impl_->source, limits.max_depth);
  } catch (const jinja::RuntimeError& e) {  // e.g. a string literal over the size limit
    fail("chat template: ", e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

namespace {

template <typename Json>
std::string render_json(const ChatTemplate::Limits& limits, const std::string& source,
                        const jinja::Body& body, const Json& context) {
  check(context.is_object(), "chat template: the render context must be a JSON object, not ",
        context.type_name());
  jinja::Value ctx;
  try {
    ctx = jinja::from_json(context);
  } catch (const jinja::RuntimeError& e) {
    fail("chat template context: ", e.what());
  }
  jinja::RenderLimits rl;
  rl.max_output_bytes = limits.max_output_bytes;
  rl.max_loop_iterations = limits.max_loop_iterations;
  rl.max_depth = limits.max_depth;
  return jinja::render(source, body, ctx, rl);
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return render_json(impl_->limits, impl_->source, impl_->body, context);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_json(impl_->limits, impl_->source, impl_->body, context);
}

std::string apply_chat_template(const ChatTemplate& t, const nlohmann::json& messages,
                                const std::string& bos_token, const std::string& eos_token,
                                bool add_generation_prompt) {
  check(messages.is_array(), "apply_chat_template: messages must be a JSON array, not ",
        messages.type_name());
  nlohmann::json context = {
      {"messages", messages},   {"bos_token", bos_token},
      {"eos_token", eos_token}, {"add_generation_prompt", add_generation_prompt},
      {"tools", nullptr},       {"documents", nullptr}};
  return t.render(context);
}

}  // namespace dsinfer
