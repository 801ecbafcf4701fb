#include "grammar/grammar_engine.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string_view>

#include "chat/deepseek_output.h"
#include "core/error.h"
#include "grammar/json_schema_support.h"
#include "grammar/xgrammar_backend.h"

namespace dsinfer {

std::vector<std::string> grammar_vocabulary(const Tokenizer& tokenizer, int64_t vocab_size) {
  std::vector<std::string> vocabulary(static_cast<size_t>(vocab_size));
  const int64_t known = std::min(vocab_size, tokenizer.vocab_size());
  for (int64_t id = 0; id < known; ++id) {
    const int32_t i = static_cast<int32_t>(id);
    if (tokenizer.is_special(i)) continue;
    if (const auto bytes = tokenizer.token_bytes(i)) vocabulary[id] = std::string(*bytes);
  }
  return vocabulary;
}

namespace {

// Every "json_schema" value of a structural tag, checked as a response_format schema is.
void check_embedded_schemas(const nlohmann::json& node, int depth) {
  check(depth <= 64, "the structural tag nests deeper than 64 levels");
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "json_schema" && (value.is_object() || value.is_boolean()))
        check_schema_support(value);
      else
        check_embedded_schemas(value, depth + 1);
    }
  } else if (node.is_array()) {
    for (const nlohmann::json& item : node) check_embedded_schemas(item, depth + 1);
  }
}

// xgrammar's matcher behind the engine's interface.
class XGrammarConstraint final : public TokenConstraint {
 public:
  XGrammarConstraint(const xgrammar_backend::Compiled& grammar, const std::vector<int32_t>& stops,
                     int64_t vocab_size)
      : matcher_(grammar, stops, vocab_size) {}
  bool next_allowed(std::vector<uint32_t>& allowed) override { return matcher_.fill_next(allowed); }
  bool accept(int32_t token) override { return matcher_.accept(token); }
  bool complete() const override { return matcher_.terminated(); }
  bool accept_bytes(const std::string& bytes) { return matcher_.accept_string(bytes); }

 private:
  xgrammar_backend::Matcher matcher_;
};

// A grammar that starts after the reasoning: no mask (and the matcher untouched) until the
// completion's bytes hold "</think>"; what the token that closes it has after the marker, leading
// whitespace aside, is the answer's first bytes (a byte-level vocabulary may merge ">\n\n{" into
// one token; a tokenizer with </think> as one token leaves nothing).
class AfterReasoningConstraint final : public TokenConstraint {
 public:
  AfterReasoningConstraint(std::unique_ptr<XGrammarConstraint> answer,
                           const std::vector<std::string>& vocabulary)
      : answer_(std::move(answer)), vocabulary_(vocabulary) {}
  bool next_allowed(std::vector<uint32_t>& allowed) override {
    return open_ ? answer_->next_allowed(allowed) : false;
  }
  bool accept(int32_t token) override {
    if (open_) return answer_->accept(token);
    if (token >= 0 && static_cast<size_t>(token) < vocabulary_.size())
      tail_ += vocabulary_[static_cast<size_t>(token)];
    const size_t at = tail_.find(kClose);
    if (at == std::string::npos) {
      // keep only what could still start the marker
      if (tail_.size() > kClose.size()) tail_.erase(0, tail_.size() - kClose.size());
      return true;
    }
    open_ = true;
    std::string rest = tail_.substr(at + kClose.size());
    rest.erase(0, std::min(rest.size(), rest.find_first_not_of(" \t\r\n")));
    tail_.clear();
    return rest.empty() || answer_->accept_bytes(rest);
  }
  bool complete() const override { return open_ && answer_->complete(); }

 private:
  static constexpr std::string_view kClose = kThinkClose;  // chat/deepseek_output.h
  std::unique_ptr<XGrammarConstraint> answer_;
  const std::vector<std::string>& vocabulary_;
  std::string tail_;  // the reasoning's last bytes, while the marker is not seen
  bool open_ = false;
};

}  // namespace

struct GrammarEngine::Impl {
  Impl(const std::vector<std::string>& vocabulary, int threads)
      : vocabulary(vocabulary), compiler(vocabulary, threads, kCacheBytes) {}

  // Compiled grammars kept (least recently used dropped beyond it).
  static constexpr int64_t kCacheBytes = int64_t{256} << 20;

  std::shared_ptr<const xgrammar_backend::Compiled> compile(const OutputGrammar& g) {
    using Kind = OutputGrammar::Kind;
    try {
      switch (g.kind) {
        case Kind::kJsonObject:
          return compiler.json_schema(R"({"type":"object"})", /*any_whitespace=*/false,
                                      /*strict=*/false);
        case Kind::kJsonSchema: {
          // keywords xgrammar would skip are an error here (json_schema_support.h)
          const nlohmann::json schema = nlohmann::json::parse(g.text, nullptr, false);
          check(!schema.is_discarded(), "the JSON Schema is not valid JSON");
          check_schema_support(schema);
          // compact JSON (no free whitespace): a model cannot pad its answer with spaces forever
          return compiler.json_schema(g.text, /*any_whitespace=*/false, g.strict);
        }
        case Kind::kGbnf:
          return compiler.ebnf(g.text, "root");
        case Kind::kRegex:
          return compiler.regex(g.text);
        case Kind::kStructuralTag: {
          // the schemas inside (a forced tool call's parameters) meet the same checks
          const nlohmann::json tag = nlohmann::json::parse(g.text, nullptr, false);
          check(!tag.is_discarded(), "the structural tag is not valid JSON");
          check_embedded_schemas(tag, 0);
          return compiler.structural_tag(g.text);
        }
        case Kind::kNone:
          break;
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("structured output: ", first_line(e.what()));
    }
    fail("structured output: no grammar to compile");
  }

  // xgrammar's message cut to its first line, without the source location it starts with
  // ("[time] path/file.cc:820: ").
  static std::string first_line(const std::string& what) {
    const std::string line = what.substr(0, what.find('\n'));
    static const std::regex location(R"(^[^ ]*\.(cc|h):[0-9]+: )");
    std::smatch m;
    const std::string::size_type cut = line.find("] ");
    const std::string rest =
        cut != std::string::npos && line[0] == '[' ? line.substr(cut + 2) : line;
    return std::regex_search(rest, m, location) ? m.suffix().str() : rest;
  }

  std::vector<std::string> vocabulary;  // each id's bytes (the reasoning's end is found in them)
  xgrammar_backend::Compiler compiler;
};

GrammarEngine::GrammarEngine(const std::vector<std::string>& vocabulary, int threads)
    : impl_(std::make_unique<Impl>(vocabulary, threads)) {}

GrammarEngine::~GrammarEngine() = default;

void GrammarEngine::validate(const OutputGrammar& grammar) {
  const auto compiled = impl_->compile(grammar);
  // a grammar that admits no answer at all (a schema that only refers to itself, say) is the
  // client's error, not a request that fails at its first token
  xgrammar_backend::Matcher matcher(*compiled, {}, impl_->compiler.vocab_size());
  std::vector<uint32_t> allowed;
  if (!matcher.fill_next(allowed) || matcher.terminated()) return;
  for (uint32_t word : allowed)
    if (word != 0) return;
  fail(
      "structured output: the grammar admits no answer (a schema that can never be satisfied, "
      "or one that only refers to itself)");
}

std::unique_ptr<TokenConstraint> GrammarEngine::constraint(const SamplingParams& params) {
  auto answer = std::make_unique<XGrammarConstraint>(*impl_->compile(params.grammar),
                                                     params.stop_ids, impl_->compiler.vocab_size());
  if (!params.grammar.after_reasoning) return answer;
  return std::make_unique<AfterReasoningConstraint>(std::move(answer), impl_->vocabulary);
}

ConstraintFactory GrammarEngine::factory() {
  return [this](const SamplingParams& params) { return constraint(params); };
}

}  // namespace dsinfer
