// A JSON value as error messages quote it: short, and never by recursion. nlohmann::json::dump()
// recurses once per level of nesting, so quoting a hostile file's 50 000-deep value in a message
// overflowed the stack (and a huge one floods the terminal): messages quote it through this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace dsinfer {

// Scalars as JSON (strings cut to max_chars); arrays and objects by their size and first few
// scalar elements or keys, e.g. `[1, 2, ...] (an array of 7)`, `an object of 3 keys ("a", "b",
// ...)`.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

// An integer field read whole and range-checked (get<int>() would cut 2^40 to 0 and 10.7 to 10):
// an Error "<what> must be an integer in [lo, hi], got <excerpt>" otherwise.
int64_t json_integer(const nlohmann::json& value, int64_t lo, int64_t hi, const std::string& what);

}  // namespace dsinfer
