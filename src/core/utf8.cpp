#include "core/utf8.h"

#include <cstdint>

namespace dsinfer {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

size_t utf8_sequence(std::string_view s, size_t i, size_t* maximal, bool* truncated) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  const uint8_t c = p[i];
  *truncated = false;
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte; later ones are always 80..BF
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    need = 2;
  } else if (c == 0xED) {
    need = 2, hi = 0x9F;
  } else if (c == 0xF0) {
    need = 3, lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    need = 3;
  } else if (c == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    *maximal = 1;  // 80..C1, F5..FF never start a character
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= n) {
      *maximal = k;
      *truncated = true;
      return 0;
    }
    const uint8_t b = p[i + k];
    if (b < lo || b > hi) {
      *maximal = k;
      return 0;
    }
    lo = 0x80, hi = 0xBF;
  }
  return need + 1;
}

size_t utf8_complete_prefix(std::string_view s) {
  // a character is at most 4 bytes: only the last 3 can start one that is cut short
  const size_t from = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = from; i < s.size(); ++i) {
    size_t maximal = 0;
    bool truncated = false;
    if (utf8_sequence(s, i, &maximal, &truncated) == 0 && truncated) return i;
  }
  return s.size();
}

}  // namespace dsinfer
