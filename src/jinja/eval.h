// Evaluator of the Jinja subset: renders a parsed template against a context, with jinja2's
// scoping (a for loop's body gets a fresh scope each iteration; if/else does not open a scope;
// namespace objects are how a loop hands values out) and hard limits on the work done.
#pragma once

#include <cstdint>
#include <string>

#include "jinja/parser.h"
#include "jinja/value.h"

namespace dsinfer::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t(1) << 20;  // rendered text, and any string value built
  uint64_t max_loop_iterations = 1000000;     // for-loop iterations, all loops together
  int max_depth = 128;                        // nesting of the template; of values: 2x this
};

// context: a Dict value (its keys are the template's variables). Throws dsinfer::Error naming
// the position (line:col) of the construct that failed.
std::string render(const std::string& source, const Body& body, const Value& context,
                   const RenderLimits& limits);

}  // namespace dsinfer::jinja
