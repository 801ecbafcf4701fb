#include "line_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace dsinfer::cli {

LineReader::LineReader(std::string prompt) : prompt_(std::move(prompt)), terminal_(isatty(STDIN_FILENO)) {}

std::optional<std::string> LineReader::read_line() {
  if (terminal_) {
    char* raw = readline(prompt_.c_str());
    if (!raw) {
      std::fputs("\n", stdout);
      return std::nullopt;
    }
    std::string line(raw);
    std::free(raw);
    if (!line.empty()) add_history(line.c_str());
    return line;
  }
  std::fputs(prompt_.c_str(), stdout);
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace dsinfer::cli
