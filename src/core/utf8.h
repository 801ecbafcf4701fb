// UTF-8, once for the whole project: the tokenizer (byte-level BPE, from_utf8_lossy decoding),
// the Jinja interpreter (strings as code points) and text streaming (never split a character).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dsinfer {

// Appends code point `cp` (< 0x110000) as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// Length of the well-formed UTF-8 sequence at s[i] (1..4, Table 3-7 of the Unicode standard), or
// 0 when the bytes there do not start one. *maximal then receives the length of the maximal
// ill-formed subpart (>= 1), or the number of bytes present when the sequence is only cut short by
// the end of s (then *truncated is set).
size_t utf8_sequence(std::string_view s, size_t i, size_t* maximal, bool* truncated);

// The code point of the well-formed sequence of `len` bytes at s[i] (len from utf8_sequence).
inline char32_t utf8_code_point(std::string_view s, size_t i, size_t len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

// The length of the longest prefix of s that ends on a character boundary: s minus a trailing
// sequence that is cut short (what a stream may emit now; the rest waits for more bytes).
size_t utf8_complete_prefix(std::string_view s);

}  // namespace dsinfer
