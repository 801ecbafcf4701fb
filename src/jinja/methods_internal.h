// Internals shared by methods.cpp (operators, access, slicing, bound methods) and str_methods.cpp
// (the str methods and string helpers). Internal to src/jinja.
#pragma once

#include <cstdint>
#include <string>

#include "jinja/builtins.h"

namespace dsinfer::jinja::detail {

inline bool is_intlike(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Bool; }
inline int64_t int_of(const Value& v) { return v.kind == Kind::Int ? v.i : (v.b ? 1 : 0); }

// The str methods of the subset (str.split, str.startswith, ...): str_methods.cpp.
Value str_method(const std::string& m, const Value& self, CallArgs& args);

}  // namespace dsinfer::jinja::detail
