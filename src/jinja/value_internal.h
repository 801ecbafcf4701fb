// Internals shared by the value files (value.cpp: the Value type's core; value_format.cpp:
// str/repr/tojson; value_compare.cpp: comparisons): the nesting guard. Internal to src/jinja.
#pragma once

#include <string>

#include "jinja/value.h"

namespace dsinfer::jinja::detail {

extern thread_local int g_depth;  // nesting of the value operation in progress (value.cpp)

// Guards recursion over nested containers.
struct DepthGuard {
  explicit DepthGuard(int& depth) : depth_(depth) {
    if (++depth_ > value_limits().max_depth) {
      --depth_;
      throw RuntimeError("values nested deeper than " + std::to_string(value_limits().max_depth) +
                         " levels");
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

}  // namespace dsinfer::jinja::detail
