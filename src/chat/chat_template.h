// Chat templates: a Jinja subset interpreter that renders Hugging Face chat templates (the
// "chat_template" of tokenizer_config.json) exactly as transformers does: jinja2 with
// trim_blocks=True and lstrip_blocks=True in an immutable sandbox, the loopcontrols extension,
// a tojson filter that is json.dumps(ensure_ascii=False), and raise_exception().
//
// Supported: text, {{ }}, {% %}, {# #}, whitespace control (-, +), {% if/elif/else %},
// {% for %} (tuple targets, "if" filter, else, loop.*, break/continue), {% set %} (names,
// tuples, namespace attributes, block form with filters), {% print %}, {% generation %};
// expressions with jinja2's precedence; Python semantics for str/int/float/bool/None/list/tuple/
// dict values, jinja2's default Undefined; the filters, tests, globals and str/dict/list methods
// listed in tests/data/chat_templates/README.md. Anything else (macros, include, import,
// extends, unknown filters or tests, ...) is rejected with an Error naming it and its position.
//
// Templates may come from strangers: there is no file, environment or clock access, and the
// output size, loop iterations, nesting depth and total work of a render are bounded (Error).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace dsinfer {

class ChatTemplate {
 public:
  struct Limits {
    size_t max_output_bytes = size_t(1) << 20;  // also bounds every string the template builds
    uint64_t max_loop_iterations = 1000000;     // for-loop iterations per render, all loops
    int max_depth = 128;                        // nesting of template blocks and expressions
  };

  // Parses the template; a syntax error or an unsupported construct throws dsinfer::Error
  // ("chat template LINE:COL: ..."). The source is used as jinja2 sees it: \r\n and \r become
  // \n and one trailing newline is dropped.
  explicit ChatTemplate(const std::string& source);
  ChatTemplate(const std::string& source, const Limits& limits);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with the keys of `context` (a JSON object) as variables. Objects keep the key order
  // of the JSON value: nlohmann::json sorts keys, nlohmann::ordered_json keeps insertion order
  // (which is what Python would see; it matters only to tojson and iteration over a mapping).
  // Errors (raise_exception, undefined operations, limits) throw dsinfer::Error with the
  // position of the failing construct.
  std::string render(const nlohmann::json& context) const;
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What transformers' apply_chat_template(messages, tokenize=False, add_generation_prompt=...)
// renders for a tokenizer whose special tokens are bos_token and eos_token: the context is
// messages, bos_token, eos_token, add_generation_prompt, and tools = documents = None.
std::string apply_chat_template(const ChatTemplate& t, const nlohmann::json& messages,
                                const std::string& bos_token, const std::string& eos_token,
                                bool add_generation_prompt);

}  // namespace dsinfer
