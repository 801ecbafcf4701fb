// Python's text-file line handling, which generate.py's batch mode relies on:
// `[line.strip() for line in open(f).readlines()]`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::cli {

// Lines as Python's universal-newline text mode splits them (\n, \r\n and \r end a line; a
// final line without an ending still counts; no empty line after a final ending).
std::vector<std::string> split_lines(std::string_view text);

// str.strip(): removes leading and trailing Unicode whitespace (str.isspace) from UTF-8 text.
std::string python_strip(std::string_view text);

}  // namespace dsinfer::cli
