// Errors and checks. Bad input never crashes: it throws dsinfer::Error with one message that
// names the culprit (file, tensor, limit); the CLI prints it and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dsinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates anything streamable: cat("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

template <typename... Args>
void check(bool condition, Args&&... args) {
  if (!condition) fail(std::forward<Args>(args)...);
}

}  // namespace dsinfer
