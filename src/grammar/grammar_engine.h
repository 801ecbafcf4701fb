// Structured output's grammar engine: xgrammar (third_party/xgrammar, used by vLLM, SGLang and
// TensorRT-LLM) compiles a request's grammar (a JSON Schema, any JSON object, a GBNF grammar or a
// regular expression) against the vocabulary once, with a cache keyed by the grammar, and its
// matcher gives each step's mask of allowed ids (engine/token_constraint.h). One GrammarEngine per
// rank; every rank builds the same constraints from the same grammars.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer {

// The vocabulary as a grammar sees it: [vocab_size] the bytes each id decodes to; "" for a
// special token and for ids the tokenizer lacks (a grammar never allows those inside its text).
std::vector<std::string> grammar_vocabulary(const Tokenizer& tokenizer, int64_t vocab_size);

class GrammarEngine {
 public:
  // `threads`: how many threads compile one grammar (its per-token mask cache over the vocabulary).
  GrammarEngine(const std::vector<std::string>& vocabulary, int threads = 2);
  ~GrammarEngine();
  GrammarEngine(const GrammarEngine&) = delete;
  GrammarEngine& operator=(const GrammarEngine&) = delete;

  // Checks and compiles params.grammar (the cache keeps it for the request's constraint): an Error
  // that names what is wrong or unsupported (a JSON Schema keyword, a grammar's syntax error).
  // Thread safe.
  void validate(const OutputGrammar& grammar);
  // The constraint of params.grammar (kind != kNone) for a request with params.stop_ids: the stop
  // ids are allowed once the grammar is complete; without stop ids the request ends there.
  // Thread safe.
  std::unique_ptr<TokenConstraint> constraint(const SamplingParams& params);
  // A ConstraintFactory for EngineOptions::make_constraint (the engine must not outlive this).
  ConstraintFactory factory();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsinfer
