// Reads the interactive prompt's lines: with line editing and history (libedit) when stdin is a
// terminal, plainly otherwise (pipes, tests). The prompt goes to stdout, as Python's input().
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace dsinfer::cli {

class LineReader {
 public:
  explicit LineReader(std::string prompt);
  // The next line without its line ending, or nullopt at end of input (Ctrl-D, closed stdin).
  // A line longer than kMaxLineBytes is an Error (memory stays bounded whatever stdin is).
  std::optional<std::string> read_line();

  static constexpr size_t kMaxLineBytes = size_t{1} << 20;

 private:
  static void check_length(size_t bytes);
  std::string prompt_;
  bool terminal_;
};

}  // namespace dsinfer::cli
