#include "text_lines.h"

#include <cstdint>

#include "core/utf8.h"

namespace dsinfer::cli {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.emplace_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.emplace_back(text.substr(start));
  return lines;
}

namespace {

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Decodes the code point starting at `i` (returns its length; 0 for an invalid sequence).
size_t decode_at(std::string_view s, size_t i, uint32_t& cp) {
  size_t maximal = 0;
  bool truncated = false;
  const size_t len = utf8_sequence(s, i, &maximal, &truncated);
  if (len > 0) cp = utf8_code_point(s, i, len);
  return len;
}

}  // namespace

std::string python_strip(std::string_view text) {
  // Walk the code points once, remembering where the non-space content starts and ends.
  size_t begin = text.size(), end = 0;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t len = decode_at(text, i, cp);
    bool space = len > 0 && is_python_space(cp);
    if (len == 0) len = 1;
    if (!space) {
      if (begin == text.size()) begin = i;
      end = i + len;
    }
    i += len;
  }
  return begin >= end ? std::string() : std::string(text.substr(begin, end - begin));
}

}  // namespace dsinfer::cli
