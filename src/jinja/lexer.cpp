// Lexer of the Jinja subset. Written after jinja2's documented lexing rules (and checked against
// jinja2 3.1 on many cases): text runs up to the next "{{", "{%" or "{#"; a "-" after the opening
// delimiter strips all whitespace before the tag; otherwise, for block and comment tags only
// (lstrip_blocks), spaces and tabs between the start of the line and the tag are removed. A "-"
// before the closing delimiter strips all whitespace after it; otherwise one newline after "%}"
// or "#}" is removed (trim_blocks); "+" turns either behaviour off.
#include "jinja/lexer.h"

#include <cstdlib>

#include "core/error.h"
#include "jinja/value.h"

namespace dsinfer::jinja {

std::string normalize_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    char c = source[k];
    if (c == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += c;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string position_of(const std::string& source, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t k = 0; k < pos && k < source.size(); ++k) {
    if (source[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(source[k]) & 0xc0) != 0x80) {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

void fail_at(const std::string& source, size_t pos, const std::string& message) {
  throw Error("chat template " + position_of(source, pos) + ": " + message);
}

namespace {

// Decodes the code point that ends just before byte `end` (end > 0); sets `start` to its first
// byte.
char32_t code_point_before(const std::string& s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
  std::vector<char32_t> cps = decode_utf8(std::string_view(s).substr(start, end - start));
  return cps.empty() ? 0xfffd : cps[0];
}

char32_t code_point_at(const std::string& s, size_t pos, size_t& len) {
  size_t maximal = 0;
  bool truncated = false;
  len = utf8_sequence(s, pos, &maximal, &truncated);
  if (len == 0) {  // not UTF-8: one U+FFFD for the byte
    len = 1;
    return 0xfffd;
  }
  return utf8_code_point(s, pos, len);
}

// Python's str.rstrip(): drops trailing (Unicode) whitespace.
std::string rstrip_ws(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start;
    if (!is_py_space(code_point_before(s, end, start))) break;
    end = start;
  }
  return s.substr(0, end);
}

// Position after the (Unicode) whitespace starting at pos.
size_t skip_ws(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    size_t len;
    if (!is_py_space(code_point_at(s, pos, len))) break;
    pos += len;
  }
  return pos;
}

bool all_ws(const std::string& s, size_t from) {
  return from < s.size() && skip_ws(s, from) == s.size();
}

bool starts_with_at(const std::string& s, size_t pos, std::string_view what) {
  return s.compare(pos, what.size(), what) == 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;  // the previous match ended with a newline (or nothing matched yet)
    while (pos < src_.size()) {
      size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        push_data(src_.substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = 0;
      if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
        sign = src_[tag + 2];
      std::string text = src_.substr(pos, tag - pos);
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if ((line_start > 0 || line_starting) && all_ws(text, line_start)) text.resize(line_start);
      }
      push_data(std::move(text), pos);
      pos = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = skip_comment(pos, tag, line_starting);
      } else {
        if (kind == '%') check_raw(pos, tag);
        pos = lex_tag(kind, tag, pos, line_starting);
      }
    }
    Token eof;
    eof.type = Tok::Eof;
    eof.pos = src_.size();
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t pos) const {
    while (true) {
      size_t k = src_.find('{', pos);
      if (k == std::string::npos || k + 1 >= src_.size()) return std::string::npos;
      char c = src_[k + 1];
      if (c == '{' || c == '%' || c == '#') return k;
      pos = k + 1;
    }
  }

  void push_data(std::string text, size_t pos) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::Data;
    t.text = std::move(text);
    t.pos = pos;
    tokens_.push_back(std::move(t));
  }

  void push(Tok type, size_t pos, std::string text = {}) {
    Token t;
    t.type = type;
    t.pos = pos;
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
  }

  // Skips a comment whose body starts at pos; returns the position after its end.
  size_t skip_comment(size_t pos, size_t tag, bool& line_starting) {
    size_t close = src_.find("#}", pos);
    if (close == std::string::npos) fail_at(src_, tag, "missing end of comment tag '#}'");
    size_t end;
    if (close > pos && src_[close - 1] == '-') {
      end = skip_ws(src_, close + 2);
    } else if (close > pos && src_[close - 1] == '+') {
      end = close + 2;
    } else {
      end = close + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;
    }
    line_starting = end > 0 && src_[end - 1] == '\n';
    return end;
  }

  // {% raw %} switches jinja2's lexer into a different mode; this subset does not have it.
  void check_raw(size_t pos, size_t tag) {
    size_t k = skip_ws(src_, pos);
    if (starts_with_at(src_, k, "raw") && (k + 3 >= src_.size() || !is_name_char(src_[k + 3])))
      fail_at(src_, tag, "unsupported tag 'raw'");
  }

  // Matches the end of a tag at pos (only when brackets are balanced); returns its length or 0.
  size_t match_end(char kind, size_t pos) const {
    if (kind == '%') {
      if (starts_with_at(src_, pos, "+%}")) return 3;
      if (starts_with_at(src_, pos, "-%}")) return skip_ws(src_, pos + 3) - pos;
      if (starts_with_at(src_, pos, "%}")) {
        size_t n = 2;
        if (pos + 2 < src_.size() && src_[pos + 2] == '\n') ++n;  // trim_blocks
        return n;
      }
      return 0;
    }
    if (starts_with_at(src_, pos, "-}}")) return skip_ws(src_, pos + 3) - pos;
    if (starts_with_at(src_, pos, "}}")) return 2;
    return 0;
  }

  size_t lex_tag(char kind, size_t tag, size_t pos, bool& line_starting) {
    push(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, tag);
    std::vector<char> brackets;
    while (true) {
      if (pos >= src_.size())
        fail_at(src_, tag,
                kind == '%' ? "missing end of block tag '%}'" : "missing end of variable tag '}}'");
      if (brackets.empty()) {
        if (size_t n = match_end(kind, pos)) {
          push(kind == '%' ? Tok::BlockEnd : Tok::VarEnd, pos);
          pos += n;
          line_starting = src_[pos - 1] == '\n';
          return pos;
        }
      }
      size_t ws = skip_ws(src_, pos);
      if (ws != pos) {
        pos = ws;
        continue;
      }
      char c = src_[pos];
      if (is_digit(c)) {
        pos = lex_number(pos);
      } else if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        push(Tok::Name, pos, src_.substr(pos, end - pos));
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        pos = lex_operator(pos, brackets);
      }
    }
  }

  size_t lex_operator(size_t pos, std::vector<char>& brackets) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (starts_with_at(src_, pos, op)) {
        push(Tok::Op, pos, op);
        return pos + 2;
      }
    }
    char c = src_[pos];
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos) {
      size_t len;
      char32_t cp = code_point_at(src_, pos, len);
      std::string shown;
      append_utf8(shown, cp);
      fail_at(src_, pos, "unexpected character '" + shown + "' in tag");
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail_at(src_, pos, std::string("unexpected '") + c + "'");
      if (brackets.back() != c)
        fail_at(src_, pos,
                std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    push(Tok::Op, pos, std::string(1, c));
    return pos + 1;
  }

  // Digits with optional "_" separators: returns the end, or start if there are none.
  size_t scan_digits(size_t k) const {
    size_t start = k;
    while (k < src_.size() && is_digit(src_[k])) {
      ++k;
      if (k + 1 < src_.size() && src_[k] == '_' && is_digit(src_[k + 1])) ++k;
    }
    return k == start ? start : k;
  }

  size_t lex_number(size_t pos) {
    auto strip = [](std::string s) {
      std::string out;
      for (char c : s)
        if (c != '_') out += c;
      return out;
    };
    // Prefixed integers: 0b, 0o, 0x.
    if (src_[pos] == '0' && pos + 2 < src_.size()) {
      char p = char(src_[pos + 1] | 0x20);
      int base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
      if (base) {
        size_t k = pos + 2;
        std::string digits;
        while (k < src_.size()) {
          char d = src_[k];
          if (d == '_') {
            ++k;
            continue;
          }
          int v = is_digit(d)                              ? d - '0'
                  : (d | 0x20) >= 'a' && (d | 0x20) <= 'f' ? (d | 0x20) - 'a' + 10
                                                           : 99;
          if (v >= base) break;
          digits += d;
          ++k;
        }
        if (!digits.empty()) {
          push_int(pos, digits, base);
          return k;
        }
      }
    }
    size_t int_end = scan_digits(pos);
    size_t end = int_end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      end = scan_digits(end + 1);
      is_float = true;
    }
    if (end < src_.size() && (src_[end] | 0x20) == 'e') {
      size_t k = end + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      size_t e_end = scan_digits(k);
      if (e_end != k) {
        end = e_end;
        is_float = true;
      }
    }
    std::string text = strip(src_.substr(pos, end - pos));
    if (is_float) {
      Token t;
      t.type = Tok::Float;
      t.pos = pos;
      t.float_value = std::strtod(text.c_str(), nullptr);
      t.text = text;
      tokens_.push_back(std::move(t));
    } else {
      push_int(pos, text, 10);
    }
    return end;
  }

  void push_int(size_t pos, const std::string& digits, int base) {
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &end, base);
    if (errno == ERANGE || v > uint64_t(INT64_MAX))
      fail_at(src_, pos, "integer literal too large (this interpreter uses 64-bit integers)");
    Token t;
    t.type = Tok::Int;
    t.pos = pos;
    t.int_value = int64_t(v);
    t.text = digits;
    tokens_.push_back(std::move(t));
  }

  // A string literal with Python's escapes (jinja2 decodes literals with "unicode-escape").
  size_t lex_string(size_t pos) {
    const char quote = src_[pos];
    size_t k = pos + 1;
    std::string out;
    while (true) {
      if (k >= src_.size()) fail_at(src_, pos, "unterminated string literal");
      char c = src_[k];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++k;
        continue;
      }
      if (k + 1 >= src_.size()) fail_at(src_, pos, "unterminated string literal");
      char e = src_[k + 1];
      k += 2;
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t need = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (size_t m = 0; m < need; ++m) {
            char h = k + m < src_.size() ? src_[k + m] : 0;
            int d = is_digit(h)                              ? h - '0'
                    : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10
                                                             : -1;
            if (d < 0)
              fail_at(src_, k - 2, std::string("truncated \\") + e + " escape in string literal");
            v = v * 16 + uint32_t(d);
          }
          if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            fail_at(src_, k - 2, "invalid code point in string literal escape");
          append_utf8(out, v);
          k += need;
          break;
        }
        case 'N':
          fail_at(src_, k - 2, "unsupported \\N{...} escape in string literal");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = uint32_t(e - '0');
            for (int m = 0; m < 2 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++m, ++k)
              v = v * 8 + uint32_t(src_[k] - '0');
            append_utf8(out, v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // Python first writes non-ASCII characters as \xhh, \uhhhh or \Uhhhhhhhh escapes, so a
            // backslash before one yields that escape text literally.
            size_t len;
            char32_t cp = code_point_at(src_, k - 1, len);
            char buf[16];
            if (cp < 0x100)
              std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(cp));
            else if (cp < 0x10000)
              std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
            else
              std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(cp));
            out += buf;
            k = k - 1 + len;
          } else {
            out += '\\';  // unknown escapes stay as they are
            out += e;
          }
      }
    }
    push(Tok::String, pos, std::move(out));
    return k + 1;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace dsinfer::jinja
