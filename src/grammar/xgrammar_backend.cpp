#include "grammar/xgrammar_backend.h"

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include <optional>

namespace dsinfer::xgrammar_backend {

struct Compiled {
  xgrammar::CompiledGrammar grammar;
};

struct Compiler::Impl {
  Impl(const std::vector<std::string>& vocabulary, int threads, int64_t cache_bytes)
      : tokenizer(vocabulary, xgrammar::VocabType::RAW, static_cast<int>(vocabulary.size())),
        compiler(tokenizer, threads, /*cache_enabled=*/true, cache_bytes) {}
  static std::shared_ptr<const Compiled> wrap(xgrammar::CompiledGrammar g) {
    return std::make_shared<const Compiled>(Compiled{std::move(g)});
  }
  xgrammar::TokenizerInfo tokenizer;
  xgrammar::GrammarCompiler compiler;
};

Compiler::Compiler(const std::vector<std::string>& vocabulary, int threads, int64_t cache_bytes)
    : impl_(std::make_unique<Impl>(vocabulary, threads, cache_bytes)),
      vocab_size_(static_cast<int64_t>(vocabulary.size())) {}

Compiler::~Compiler() = default;

std::shared_ptr<const Compiled> Compiler::json_schema(const std::string& schema,
                                                      bool any_whitespace, bool strict) {
  return Impl::wrap(impl_->compiler.CompileJSONSchema(schema, any_whitespace, std::nullopt,
                                                      std::nullopt, strict));
}

std::shared_ptr<const Compiled> Compiler::ebnf(const std::string& grammar,
                                               const std::string& root) {
  return Impl::wrap(impl_->compiler.CompileGrammar(grammar, root));
}

std::shared_ptr<const Compiled> Compiler::regex(const std::string& pattern) {
  return Impl::wrap(impl_->compiler.CompileRegex(pattern));
}

std::shared_ptr<const Compiled> Compiler::structural_tag(const std::string& tag_json) {
  return Impl::wrap(impl_->compiler.CompileStructuralTag(tag_json));
}

struct Matcher::Impl {
  xgrammar::GrammarMatcher matcher;
  int64_t vocab_size;
};

Matcher::Matcher(const Compiled& grammar, const std::vector<int32_t>& stops, int64_t vocab_size)
    : impl_(std::make_unique<Impl>(Impl{
          xgrammar::GrammarMatcher(grammar.grammar,
                                   stops.empty() ? std::nullopt
                                                 : std::optional<std::vector<int>>(std::vector<int>(
                                                       stops.begin(), stops.end())),
                                   /*terminate_without_stop_token=*/stops.empty()),
          vocab_size})) {}

Matcher::~Matcher() = default;

bool Matcher::fill_next(std::vector<uint32_t>& allowed) {
  int64_t words = xgrammar::GetBitmaskSize(static_cast<int>(impl_->vocab_size));
  allowed.resize(static_cast<size_t>(words));
  DLTensor t{};  // [words] int32, the layout xgrammar fills
  t.data = allowed.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = &words;
  return impl_->matcher.FillNextTokenBitmask(&t);
}

bool Matcher::accept(int32_t token) { return impl_->matcher.AcceptToken(token); }

bool Matcher::accept_string(const std::string& bytes) { return impl_->matcher.AcceptString(bytes); }

bool Matcher::terminated() const { return impl_->matcher.IsTerminated(); }

}  // namespace dsinfer::xgrammar_backend
