// Printing of values with Python semantics (str, repr, float repr) and JSON serialisation as
// json.dumps does it (tojson).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/value.h"
#include "jinja/value_internal.h"

namespace dsinfer::jinja {

using detail::DepthGuard;
using detail::g_depth;

// --- printing ------------------------------------------------------------------------------------

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = false;
  size_t p = 0;
  if (sci[0] == '-') {
    negative = true;
    p = 1;
  }
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t k = p; k < epos; ++k)
    if (sci[k] != '.') digits += sci[k];
  int exponent = std::stoi(sci.substr(epos + 1));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
  } else if (exponent >= 0) {
    size_t int_len = size_t(exponent) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
  }
  return out;
}

namespace {

// Characters Python's str.isprintable() rejects (and repr() therefore escapes): C0/C1 controls,
// separators other than the ASCII space, common format characters, private use, noncharacters.
bool py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad || c == 0x1680 || c == 0x180e || c == 0x061c || c == 0x06dd || c == 0x070f)
    return false;
  if (c >= 0x0600 && c <= 0x0605) return false;
  if (c >= 0x2000 && c <= 0x200f) return false;
  if (c >= 0x2028 && c <= 0x202f) return false;
  if (c >= 0x205f && c <= 0x2064) return false;
  if (c >= 0x2066 && c <= 0x206f) return false;
  if (c == 0x3000 || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return false;
  if (c >= 0xd800 && c <= 0xf8ff) return false;  // surrogates, private use
  if ((c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe) return false;
  if (c >= 0xe0000) return c >= 0xe0100 && c <= 0xe01ef;  // tags are Cf; variation selectors ok
  return true;
}

}  // namespace

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (py_printable(c)) {
      append_utf8(out, c);
    } else {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    }
  }
  out += quote;
  return out;
}

namespace {

void append_repr(std::string& out, const Value& v);

void append_str(std::string& out, const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return;
    case Kind::None:
      out += "None";
      return;
    case Kind::Bool:
      out += v.b ? "True" : "False";
      return;
    case Kind::Int:
      out += std::to_string(v.i);
      return;
    case Kind::Float:
      out += float_repr(v.f);
      return;
    case Kind::String:
      out += *v.str();
      return;
    case Kind::Namespace: {
      out += "<Namespace ";
      Value d;
      d.kind = Kind::Dict;
      d.ptr = std::shared_ptr<const Dict>(std::static_pointer_cast<const NamespaceObj>(v.ptr),
                                          &v.ns()->attrs);
      append_repr(out, d);
      out += ">";
      return;
    }
    case Kind::Callable:
      out += "<built-in function " + v.fn()->name + ">";
      return;
    case Kind::Loop:
      out += "<LoopContext " + std::to_string(v.loop()->index0 + 1) + "/" +
             std::to_string(v.loop()->items.size()) + ">";
      return;
    default:
      append_repr(out, v);
      return;
  }
}

void append_repr(std::string& out, const Value& v) {
  DepthGuard guard(g_depth);
  switch (v.kind) {
    case Kind::Undefined:
      out += "Undefined";
      return;
    case Kind::String:
      if (v.markup) {
        out += "Markup(" + string_repr(*v.str()) + ")";
      } else {
        out += string_repr(*v.str());
      }
      return;
    case Kind::List:
    case Kind::Tuple: {
      const bool tuple = v.kind == Kind::Tuple;
      out += tuple ? '(' : '[';
      for (size_t k = 0; k < v.items()->size(); ++k) {
        if (k) out += ", ";
        append_repr(out, (*v.items())[k]);
      }
      if (tuple && v.items()->size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.dict()->entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k);
        out += ": ";
        append_repr(out, val);
      }
      out += '}';
      return;
    }
    default:
      append_str(out, v);
      return;
  }
}

}  // namespace

std::string to_str(const Value& v) {
  if (v.kind == Kind::String) return *v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

// --- JSON output (json.dumps) ------------------------------------------------------------------

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : decode_utf8(s)) {
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xd800 + (v >> 10)),
                      unsigned(0xdc00 + (v & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      }
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

void json_newline(std::string& out, const JsonOptions& o, int level) {
  out += '\n';
  for (int k = 0; k < level; ++k) out += o.indent;
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int level) {
  DepthGuard guard(g_depth);
  charge(1);
  if (out.size() > value_limits().max_string_bytes)
    throw RuntimeError("tojson output exceeds the limit of " +
                       std::to_string(value_limits().max_string_bytes) + " bytes");
  switch (v.kind) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.i);
      return;
    case Kind::Float:
      out += json_float(v.f);
      return;
    case Kind::String:
      json_string(out, *v.str(), o.ensure_ascii);
      return;
    case Kind::List:
    case Kind::Tuple: {
      if (v.items()->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.items()->size(); ++k) {
        if (k) out += o.item_separator;
        if (o.has_indent) json_newline(out, o, level + 1);
        json_value(out, (*v.items())[k], o, level + 1);
      }
      if (o.has_indent) json_newline(out, o, level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict()->entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      bool all_strings = true;
      for (const auto& [k, val] : v.dict()->entries) {
        std::string key;
        switch (k.kind) {
          case Kind::String:
            key = *k.str();
            break;
          case Kind::Int:
            key = std::to_string(k.i);
            all_strings = false;
            break;
          case Kind::Float:
            key = json_float(k.f);
            all_strings = false;
            break;
          case Kind::Bool:
            key = k.b ? "true" : "false";
            all_strings = false;
            break;
          case Kind::None:
            key = "null";
            all_strings = false;
            break;
          default:
            throw RuntimeError("keys must be str, int, float, bool or None, not " + type_name(k));
        }
        entries.emplace_back(std::move(key), &val);
      }
      if (o.sort_keys) {
        if (!all_strings) throw RuntimeError("tojson(sort_keys=true) needs string keys");
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
      }
      out += '{';
      bool first = true;
      for (const auto& [key, val] : entries) {
        if (!first) out += o.item_separator;
        first = false;
        if (o.has_indent) json_newline(out, o, level + 1);
        json_string(out, key, o.ensure_ascii);
        out += o.key_separator;
        json_value(out, *val, o, level + 1);
      }
      if (o.has_indent) json_newline(out, o, level);
      out += '}';
      return;
    }
    default:
      throw RuntimeError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_value(out, v, options, 0);
  return out;
}

}  // namespace dsinfer::jinja
