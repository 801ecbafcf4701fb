// What structured output accepts of JSON Schema: the keywords the grammar engine turns into a
// grammar (OpenAI's strict-mode subset and more), checked before compiling so that a schema using
// anything else is a clear error naming the keyword and where it sits, not a grammar that quietly
// ignores it (xgrammar skips keywords it does not know).
#pragma once

#include <nlohmann/json.hpp>

namespace dsinfer {

// An Error naming the first unsupported keyword or format (with its JSON pointer), or a schema
// that is not a JSON object or boolean.
void check_schema_support(const nlohmann::json& schema);

}  // namespace dsinfer
