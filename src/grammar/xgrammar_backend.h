// The one place that includes xgrammar's headers, compiled as C++17 (xgrammar's language: its
// headers name a vector of an incomplete type in a default argument, which C++20's constexpr
// vector rejects under clang). This header itself is plain C++17 and xgrammar-free, so the
// C++20 code of src/grammar uses it. Errors are std::runtime_error with xgrammar's message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsinfer::xgrammar_backend {

// A compiled grammar (xgrammar::CompiledGrammar), shared by every matcher of it.
struct Compiled;

class Compiler {
 public:
  // vocabulary[id]: the bytes of each id ("" for an id never allowed); `threads` compile one
  // grammar; compiled grammars are cached up to `cache_bytes`.
  Compiler(const std::vector<std::string>& vocabulary, int threads, int64_t cache_bytes);
  ~Compiler();
  std::shared_ptr<const Compiled> json_schema(const std::string& schema, bool any_whitespace,
                                              bool strict);
  std::shared_ptr<const Compiled> ebnf(const std::string& grammar, const std::string& root);
  std::shared_ptr<const Compiled> regex(const std::string& pattern);
  std::shared_ptr<const Compiled> structural_tag(const std::string& tag_json);
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_;
};

class Matcher {
 public:
  // stops: the ids allowed once the grammar is complete; none: the matcher ends there.
  Matcher(const Compiled& grammar, const std::vector<int32_t>& stops, int64_t vocab_size);
  ~Matcher();
  // allowed[(vocab + 31) / 32] filled; false when every id is allowed
  bool fill_next(std::vector<uint32_t>& allowed);
  bool accept(int32_t token);
  // Bytes that are not a whole token (the rest of one after a marker); false if not allowed.
  bool accept_string(const std::string& bytes);
  bool terminated() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsinfer::xgrammar_backend
