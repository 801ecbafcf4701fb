// Reads the interactive prompt's lines: with line editing and history (libedit) when stdin is a
// terminal, plainly otherwise (pipes, tests). The prompt goes to stdout, as Python's input().
#pragma once

#include <optional>
#include <string>

namespace dsinfer::cli {

class LineReader {
 public:
  explicit LineReader(std::string prompt);
  // The next line without its line ending, or nullopt at end of input (Ctrl-D, closed stdin).
  std::optional<std::string> read_line();

 private:
  std::string prompt_;
  bool terminal_;
};

}  // namespace dsinfer::cli
