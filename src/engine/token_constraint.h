// Structured output (docs: README "Structured output"): a request whose completion must match a
// grammar carries a TokenConstraint, which says before each draw which token ids may come next and
// follows the tokens drawn. The engine masks every other id to -infinity before the keyed draw
// (engine/vocab_draw.h), so a constrained request's tokens stay a function of its own tokens,
// parameters and seed: batch invariant, like any other. The engine only sees this interface; the
// grammar engine behind it (src/grammar, xgrammar) is the front end's choice
// (EngineOptions::make_constraint).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/sampling.h"

namespace dsinfer {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Fills allowed[(vocab + 31) / 32]: bit (id % 32) of word id / 32 set when id may come next.
  // false when every id may (nothing to mask; `allowed` is then left as it was).
  virtual bool next_allowed(std::vector<uint32_t>& allowed) = 0;
  // Follows the token drawn; false when the grammar does not allow it (then the state is as
  // before).
  virtual bool accept(int32_t token) = 0;
  // The grammar is complete and allows nothing more, not even a stop id (a constraint made for a
  // request without stop ids ends there).
  virtual bool complete() const = 0;
};

// Makes the constraint of params.grammar (kind != kNone) for a request with these stop ids; an
// Error naming the problem for a grammar it cannot build (a schema feature it lacks, a bad
// grammar). Called on every rank for every constrained request (rank 0 in submit(), the others
// when rank 0's orders arrive), so it must give the same constraint everywhere.
using ConstraintFactory = std::function<std::unique_ptr<TokenConstraint>(const SamplingParams&)>;

inline bool allowed_bit(const uint32_t* allowed, int64_t id) {
  return (allowed[id >> 5] >> (id & 31)) & 1u;
}

}  // namespace dsinfer
