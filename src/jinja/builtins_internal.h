// Internals shared by builtins.cpp (argument binding, globals, tests) and filters.cpp (the
// filters). Internal to src/jinja.
#pragma once

#include <cstdint>

#include "jinja/value.h"

namespace dsinfer::jinja::detail {

// The integer of an int or bool (odd/even, abs); raises on an Undefined or another type.
int64_t int_or_fail(const Value& v, const char* what);

}  // namespace dsinfer::jinja::detail
