// The source text of one value inside a JSON document. nlohmann::json keeps an object's keys
// sorted, so a value re-serialised with dump() loses the order its author wrote; where the order
// means something (a JSON Schema's properties: the order a constrained answer writes them in), the
// value is taken from the text as it came.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer {

// The text of the value reached from the top-level object by the object keys `path` in
// `document`, which must be well-formed JSON (parse it first: this only scans). With a key given
// twice the last one counts, as nlohmann::json's parse. nullopt when the path is not there.
// Iterative, so any nesting depth is safe.
std::optional<std::string_view> json_source_at(std::string_view document,
                                               const std::vector<std::string>& path);

}  // namespace dsinfer
