// The Python str methods of the subset (str.split, str.strip, str.startswith, ...) and the string
// helpers the filters share (case mapping, strip, split, replace, splitlines), as Python does them.
#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/methods_internal.h"

namespace dsinfer::jinja {

using detail::int_of;
using detail::is_intlike;

// --- string helpers --------------------------------------------------------------------------

namespace {

char32_t upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c <= 0x137 || (c >= 0x14a && c <= 0x177)) && c != 0x130 && c != 0x131)
      return (c & 1) ? c - 1 : c;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c : c - 1;
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    return c;
  }
  if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

char32_t lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c <= 0x137 || (c >= 0x14a && c <= 0x177)) && c != 0x130 && c != 0x131)
      return (c & 1) ? c : c + 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c + 1 : c;
    return c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_cased(char32_t c) { return upper_cp(c) != c || lower_cp(c) != c || c == 0xdf; }

void append_upper(std::string& out, char32_t c) {
  if (c == 0xdf) {
    out += "SS";
  } else {
    append_utf8(out, upper_cp(c));
  }
}

void append_lower(std::string& out, char32_t c) {
  if (c == 0x130) {
    out += "i\xcc\x87";  // i + COMBINING DOT ABOVE
  } else {
    append_utf8(out, lower_cp(c));
  }
}

bool in_chars(char32_t c, const std::vector<char32_t>* chars) {
  if (!chars) return is_py_space(c);
  return std::find(chars->begin(), chars->end(), c) != chars->end();
}

const std::string& str_arg(const Value& v, const std::string& what) {
  if (!v.is_string()) throw RuntimeError(what + " must be str, not " + type_name(v));
  return *v.str();
}

// Code point range [start, end) of s selected by optional Python-style start/end arguments.
void sub_range(const std::vector<char32_t>& cps, const Params& p, size_t first, size_t& b,
               size_t& e) {
  const int64_t n = int64_t(cps.size());
  auto norm = [&](const Value* x, int64_t dflt) {
    if (!x || x->is_none()) return dflt;
    if (!is_intlike(*x)) throw RuntimeError("slice indices must be integers or None");
    int64_t k = int_of(*x);
    if (k < 0) k = std::max<int64_t>(0, k + n);
    return std::min(k, n);
  };
  b = size_t(norm(p.get(first), 0));
  e = size_t(norm(p.get(first + 1), n));
  if (e < b) e = b;
}

}  // namespace

std::string case_map(const std::string& s, bool upper) {
  std::string out;
  for (char32_t c : decode_utf8(s)) upper ? append_upper(out, c) : append_lower(out, c);
  return out;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<char32_t> set;
  const std::vector<char32_t>* cs = nullptr;
  if (!chars.is_none() && !chars.is_undefined()) {
    set = decode_utf8(str_arg(chars, "strip arg"));
    cs = &set;
  }
  std::vector<char32_t> cps = decode_utf8(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && in_chars(cps[b], cs)) ++b;
  if (right)
    while (e > b && in_chars(cps[e - 1], cs)) --e;
  return encode_utf8(cps, b, e);
}

ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  ValueList out;
  int64_t left = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<char32_t> c = decode_utf8(s);
    const int64_t n = int64_t(c.size());
    if (!from_right) {
      int64_t i = 0;
      while (left-- > 0) {
        while (i < n && is_py_space(c[size_t(i)])) ++i;
        if (i == n) break;
        int64_t j = i;
        while (i < n && !is_py_space(c[size_t(i)])) ++i;
        out.push_back(Value::string(encode_utf8(c, size_t(j), size_t(i))));
      }
      while (i < n && is_py_space(c[size_t(i)])) ++i;
      if (i < n) out.push_back(Value::string(encode_utf8(c, size_t(i), size_t(n))));
    } else {
      int64_t i = n - 1;
      while (left-- > 0) {
        while (i >= 0 && is_py_space(c[size_t(i)])) --i;
        if (i < 0) break;
        int64_t j = i;
        while (i >= 0 && !is_py_space(c[size_t(i)])) --i;
        out.push_back(Value::string(encode_utf8(c, size_t(i + 1), size_t(j + 1))));
      }
      while (i >= 0 && is_py_space(c[size_t(i)])) --i;
      if (i >= 0) out.push_back(Value::string(encode_utf8(c, 0, size_t(i + 1))));
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  const std::string& d = str_arg(sep, "separator");
  if (d.empty()) throw RuntimeError("empty separator");
  if (!from_right) {
    size_t start = 0;
    while (left-- > 0) {
      size_t k = s.find(d, start);
      if (k == std::string::npos) break;
      out.push_back(Value::string(s.substr(start, k - start)));
      start = k + d.size();
    }
    out.push_back(Value::string(s.substr(start)));
  } else {
    size_t end = s.size();
    while (left-- > 0 && end >= d.size()) {
      size_t k = s.rfind(d, end - d.size());
      if (k == std::string::npos) break;
      out.push_back(Value::string(s.substr(k + d.size(), end - k - d.size())));
      end = k;
    }
    out.push_back(Value::string(s.substr(0, end)));
    std::reverse(out.begin(), out.end());
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    std::vector<char32_t> cps = decode_utf8(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count > 0) {
        out += repl;
        --count;
      }
      if (k < cps.size()) append_utf8(out, cps[k]);
      if (out.size() > value_limits().max_string_bytes) break;
    }
    return out;
  }
  size_t start = 0;
  while (count-- > 0) {
    size_t k = s.find(old, start);
    if (k == std::string::npos) break;
    out.append(s, start, k - start);
    out += repl;
    start = k + old.size();
    if (out.size() > value_limits().max_string_bytes) break;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s) {
  std::vector<std::string> lines;
  std::vector<char32_t> c = decode_utf8(s);
  size_t start = 0, k = 0;
  while (k < c.size()) {
    char32_t x = c[k];
    bool brk = x == '\n' || x == '\r' || x == 0x0b || x == 0x0c || x == 0x1c || x == 0x1d ||
               x == 0x1e || x == 0x85 || x == 0x2028 || x == 0x2029;
    if (!brk) {
      ++k;
      continue;
    }
    lines.push_back(encode_utf8(c, start, k));
    k += (x == '\r' && k + 1 < c.size() && c[k + 1] == '\n') ? 2 : 1;
    start = k;
  }
  if (start < c.size()) lines.push_back(encode_utf8(c, start, c.size()));
  return lines;
}

// --- str methods -----------------------------------------------------------------------------

namespace detail {

Value str_method(const std::string& m, const Value& self, CallArgs& args) {
  const std::string& s = *self.str();
  const std::string fn = "str." + m;
  if (m == "split" || m == "rsplit") {
    Params p(fn, args, {"sep", "maxsplit"});
    return Value::list(
        py_split(s, p.has(0) ? *p.get(0) : Value::none(), p.get_int(1, -1), m == "rsplit"));
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    Params p(fn, args, {"chars"});
    return Value::string(
        py_strip(s, p.has(0) ? *p.get(0) : Value::none(), m != "rstrip", m != "lstrip"));
  }
  if (m == "startswith" || m == "endswith") {
    Params p(fn, args, {"prefix", "start", "end"});
    if (!p.has(0)) throw RuntimeError(fn + "() takes at least 1 argument");
    std::vector<char32_t> cps = decode_utf8(s);
    size_t b, e;
    sub_range(cps, p, 1, b, e);
    std::string sub = encode_utf8(cps, b, e);
    ValueList cands;
    if (p.get(0)->kind == Kind::Tuple) {
      cands = *p.get(0)->items();
    } else if (p.get(0)->is_string()) {
      cands.push_back(*p.get(0));
    } else {
      throw RuntimeError(m + " first arg must be str or a tuple of str, not " +
                         type_name(*p.get(0)));
    }
    for (const Value& c : cands) {
      const std::string& x = str_arg(c, m + " item");
      if (x.size() > sub.size()) continue;
      if (m == "startswith" ? sub.compare(0, x.size(), x) == 0
                            : sub.compare(sub.size() - x.size(), x.size(), x) == 0)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (m == "replace") {
    Params p(fn, args, {"old", "new", "count"});
    if (!p.has(0) || !p.has(1)) throw RuntimeError(fn + "() takes at least 2 arguments");
    return Value::string(py_replace(s, str_arg(*p.get(0), "replace() argument 1"),
                                    str_arg(*p.get(1), "replace() argument 2"), p.get_int(2, -1)));
  }
  if (m == "upper" || m == "lower") {
    Params p(fn, args, {});
    return Value::string(case_map(s, m == "upper"));
  }
  if (m == "title" || m == "capitalize") {
    Params p(fn, args, {});
    std::string out;
    bool prev_cased = false, first = true;
    for (char32_t c : decode_utf8(s)) {
      bool up = m == "title" ? !prev_cased : first;
      up ? append_upper(out, c) : append_lower(out, c);
      prev_cased = is_cased(c);
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    Params p(fn, args, {"sub", "start", "end"});
    if (!p.has(0)) throw RuntimeError(fn + "() takes at least 1 argument");
    const std::string& sub = str_arg(*p.get(0), fn + "() argument");
    std::vector<char32_t> cps = decode_utf8(s);
    size_t b, e;
    sub_range(cps, p, 1, b, e);
    std::string hay = encode_utf8(cps, b, e);
    if (m == "count") {
      if (sub.empty()) return Value::integer(int64_t(e - b + 1));
      int64_t n = 0;
      for (size_t k = hay.find(sub); k != std::string::npos; k = hay.find(sub, k + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t k = (m == "find" || m == "index") ? hay.find(sub) : hay.rfind(sub);
    if (k == std::string::npos) {
      if (m == "index" || m == "rindex") throw RuntimeError("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(int64_t(b + count_code_points(std::string_view(hay).substr(0, k))));
  }
  if (m == "join") {
    Params p(fn, args, {"iterable"});
    if (!p.has(0)) throw RuntimeError(fn + "() takes exactly one argument");
    std::string out;
    ValueList items = iterate(*p.get(0));
    for (size_t k = 0; k < items.size(); ++k) {
      if (!items[k].is_string())
        throw RuntimeError("sequence item " + std::to_string(k) + ": expected str instance, " +
                           type_name(items[k]) + " found");
      if (k) out += s;
      out += *items[k].str();
    }
    return Value::string(std::move(out));
  }
  if (m == "splitlines") {
    Params p(fn, args, {"keepends"});
    if (p.get_bool(0, false)) throw RuntimeError("unsupported str.splitlines(keepends=True)");
    ValueList out;
    for (auto& line : py_splitlines(s)) out.push_back(Value::string(std::move(line)));
    return Value::list(std::move(out));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    Params p(fn, args, {"affix"});
    if (!p.has(0)) throw RuntimeError(fn + "() takes exactly one argument");
    const std::string& a = str_arg(*p.get(0), fn + "() argument");
    if (m == "removeprefix" && s.compare(0, a.size(), a) == 0)
      return Value::string(s.substr(a.size()));
    if (m == "removesuffix" && !a.empty() && s.size() >= a.size() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0)
      return Value::string(s.substr(0, s.size() - a.size()));
    return Value::string(s);
  }
  if (m == "isspace" || m == "isdigit" || m == "isalpha" || m == "isalnum" || m == "isupper" ||
      m == "islower") {
    Params p(fn, args, {});
    std::vector<char32_t> cps = decode_utf8(s);
    if (cps.empty()) return Value::boolean(false);
    if (m == "isupper" || m == "islower") {
      bool any = false;
      for (char32_t c : cps) {
        if (!is_cased(c)) continue;
        any = true;
        if (m == "isupper" ? lower_cp(c) == c && c != 0xdf : upper_cp(c) == c)
          return Value::boolean(false);
      }
      return Value::boolean(any);
    }
    for (char32_t c : cps) {
      bool digit = (c >= '0' && c <= '9') || (c >= 0xff10 && c <= 0xff19);
      bool alpha = is_cased(c) || (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3041 && c <= 0x30ff) ||
                   (c >= 0xac00 && c <= 0xd7a3) || c == 0xaa || c == 0xba;
      bool ok = m == "isspace"   ? is_py_space(c)
                : m == "isdigit" ? digit
                : m == "isalpha" ? alpha
                                 : (alpha || digit);
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  throw RuntimeError("unsupported method '" + fn + "'");
}

}  // namespace detail

}  // namespace dsinfer::jinja
