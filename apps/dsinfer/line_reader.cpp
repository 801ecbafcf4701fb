#include "line_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/error.h"

namespace dsinfer::cli {

void LineReader::check_length(size_t bytes) {
  check(bytes <= kMaxLineBytes, "an input line on stdin is longer than ", kMaxLineBytes,
        " bytes (1 MiB), the most one chat turn takes");
}

LineReader::LineReader(std::string prompt)
    : prompt_(std::move(prompt)), terminal_(isatty(STDIN_FILENO)) {}

std::optional<std::string> LineReader::read_line() {
  if (terminal_) {
    char* raw = readline(prompt_.c_str());
    if (!raw) {
      std::fputs("\n", stdout);
      return std::nullopt;
    }
    std::string line(raw);
    std::free(raw);
    check_length(line.size());
    if (!line.empty()) add_history(line.c_str());
    return line;
  }
  std::fputs(prompt_.c_str(), stdout);
  std::fflush(stdout);
  // byte by byte rather than std::getline, which would grow the line without bound (stdin
  // from /dev/zero, a stream with no newline)
  std::string line;
  std::streambuf* in = std::cin.rdbuf();
  int c = EOF;
  bool any = false;
  errno = 0;
  while ((c = in->sbumpc()) != EOF) {
    any = true;
    if (c == '\n') break;
    line.push_back(static_cast<char>(c));
    check_length(line.size());
  }
  // (std::cin reads through stdio's stdin: a failed read, a directory or /proc/self/mem as
  // stdin, is its error flag, not the end of the input)
  if (c == EOF && std::ferror(stdin))
    fail("cannot read stdin: ", errno != 0 ? std::strerror(errno) : "a read error");
  if (!any) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace dsinfer::cli
