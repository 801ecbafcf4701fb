// Python semantics of the Jinja subset's values: printing (str/repr), equality, ordering,
// membership, iteration, JSON serialisation as json.dumps, and UTF-8 helpers.
#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace dsinfer::jinja {

namespace {

thread_local ValueLimits g_limits;

// Guards recursion over nested containers.
struct DepthGuard {
  explicit DepthGuard(int& depth) : depth_(depth) {
    if (++depth_ > g_limits.max_depth) {
      --depth_;
      throw RuntimeError("values nested deeper than " + std::to_string(g_limits.max_depth) +
                         " levels");
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};
thread_local int g_depth = 0;
thread_local uint64_t g_work = 0;

}  // namespace

const ValueLimits& value_limits() { return g_limits; }
void set_value_limits(const ValueLimits& limits) { g_limits = limits; }
void reset_work() { g_work = 0; }
void charge(uint64_t units) {
  g_work += units;
  if (g_work > g_limits.max_work)
    throw RuntimeError("template exceeded its work limit (" + std::to_string(g_limits.max_work) +
                       " units of string bytes, list items and comparisons)");
}

// --- construction ----------------------------------------------------------------------------

Value Value::undefined(std::string message) {
  Value v;
  v.kind = Kind::Undefined;
  v.ptr = std::make_shared<const std::string>(std::move(message));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x, bool markup) {
  if (x.size() > g_limits.max_string_bytes)
    throw RuntimeError("string of " + std::to_string(x.size()) + " bytes exceeds the limit of " +
                       std::to_string(g_limits.max_string_bytes) + " bytes");
  charge(1 + x.size());
  Value v;
  v.kind = Kind::String;
  v.markup = markup;
  v.ptr = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::list(ValueList x) {
  if (x.size() > g_limits.max_list_items)
    throw RuntimeError("list of " + std::to_string(x.size()) + " items exceeds the limit of " +
                       std::to_string(g_limits.max_list_items) + " items");
  charge(1 + 16 * x.size());
  Value v;
  v.kind = Kind::List;
  v.ptr = std::make_shared<const ValueList>(std::move(x));
  return v;
}
Value Value::tuple(ValueList x) {
  Value v = list(std::move(x));
  v.kind = Kind::Tuple;
  return v;
}
Value Value::dictionary(Dict d) {
  Value v;
  v.kind = Kind::Dict;
  v.ptr = std::make_shared<const Dict>(std::move(d));
  return v;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.kind == Kind::String && *k.str() == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.kind == Kind::String) return find(std::string_view(*key.str()));
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

// --- JSON input ------------------------------------------------------------------------------

namespace {

template <typename Json>
Value convert_json(const Json& j) {
  DepthGuard guard(g_depth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value::number(double(u));
      return Value::integer(int64_t(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: {
      // Context values are not subject to the string limit; only values the template builds are.
      Value v;
      v.kind = Kind::String;
      v.ptr = std::make_shared<const std::string>(j.template get<std::string>());
      return v;
    }
    case nlohmann::json::value_t::array: {
      Value v;
      v.kind = Kind::List;
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e));
      v.ptr = std::make_shared<const ValueList>(std::move(items));
      return v;
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        Value key;
        key.kind = Kind::String;
        key.ptr = std::make_shared<const std::string>(it.key());
        d.entries.emplace_back(std::move(key), convert_json(it.value()));
      }
      return Value::dictionary(std::move(d));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  throw RuntimeError("binary JSON values are not supported");
}

}  // namespace

Value from_json(const nlohmann::json& j) { return convert_json(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert_json(j); }

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return v.markup ? "Markup" : "str";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Callable:
      return "builtin_function_or_method";
    case Kind::Loop:
      return "LoopContext";
  }
  return "object";
}

Value make_undefined_attr(const Value& obj, const std::string& attr) {
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + attr + "'");
}

// --- truthiness, printing ------------------------------------------------------------------------

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
      return v.i != 0;
    case Kind::Float:
      return v.f != 0.0;
    case Kind::String:
      return !v.str()->empty();
    case Kind::List:
    case Kind::Tuple:
      return !v.items()->empty();
    case Kind::Dict:
      return !v.dict()->entries.empty();
    default:
      return true;
  }
}

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

// --- comparisons -------------------------------------------------------------------------------

namespace {

double as_double(const Value& v) {
  if (v.kind == Kind::Float) return v.f;
  if (v.kind == Kind::Int) return double(v.i);
  return v.b ? 1.0 : 0.0;
}

int64_t as_int(const Value& v) { return v.kind == Kind::Int ? v.i : (v.b ? 1 : 0); }

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return *a.str() == *b.str();
    case Kind::List:
    case Kind::Tuple: {
      if (a.items() == b.items()) return true;
      if (a.items()->size() != b.items()->size()) return false;
      DepthGuard guard(g_depth);
      charge(a.items()->size());
      for (size_t k = 0; k < a.items()->size(); ++k)
        if (!equals((*a.items())[k], (*b.items())[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict() == b.dict()) return true;
      if (a.dict()->entries.size() != b.dict()->entries.size()) return false;
      DepthGuard guard(g_depth);
      charge(a.dict()->entries.size());
      for (const auto& [k, v] : a.dict()->entries) {
        const Value* other = b.dict()->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::Namespace:
      return a.ns() == b.ns();
    case Kind::Callable:
      return a.fn() == b.fn();
    case Kind::Loop:
      return a.loop() == b.loop();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  charge(1);
  if (a.is_undefined()) throw RuntimeError(*a.str());
  if (b.is_undefined()) throw RuntimeError(*b.str());
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return as_double(a) < as_double(b);
    return as_int(a) < as_int(b);
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return *a.str() < *b.str();
  if ((a.kind == Kind::List || a.kind == Kind::Tuple) && a.kind == b.kind) {
    DepthGuard guard(g_depth);
    const ValueList& x = *a.items();
    const ValueList& y = *b.items();
    charge(std::min(x.size(), y.size()));
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equals(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  throw RuntimeError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                     type_name(b) + "'");
}

bool contains(const Value& container, const Value& item) {
  if (container.kind == Kind::String) charge(container.str()->size());
  if (container.is_sequence()) charge(container.items()->size());
  switch (container.kind) {
    case Kind::String:
      if (item.kind != Kind::String)
        throw RuntimeError("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str()->find(*item.str()) != std::string::npos;
    case Kind::List:
    case Kind::Tuple:
      for (const Value& e : *container.items())
        if (equals(e, item)) return true;
      return false;
    case Kind::Dict:
      if (item.kind == Kind::List || item.kind == Kind::Dict || item.kind == Kind::Namespace)
        throw RuntimeError("unhashable type: '" + type_name(item) + "'");
      return container.dict()->find(item) != nullptr;
    case Kind::Undefined:
      return false;
    default:
      throw RuntimeError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

ValueList iterate(const Value& v) {
  if (v.is_sequence()) charge(16 * v.items()->size());
  if (v.kind == Kind::Dict) charge(16 * v.dict()->entries.size());
  switch (v.kind) {
    case Kind::List:
    case Kind::Tuple:
      return *v.items();
    case Kind::Dict: {
      ValueList keys;
      keys.reserve(v.dict()->entries.size());
      for (const auto& e : v.dict()->entries) keys.push_back(e.first);
      return keys;
    }
    case Kind::String: {
      ValueList chars;
      for (char32_t c : decode_utf8(*v.str())) {
        std::string one;
        append_utf8(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return chars;
    }
    case Kind::Undefined:
      return {};
    default:
      throw RuntimeError("'" + type_name(v) + "' object is not iterable");
  }
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
  if (out.size() > g_limits.max_string_bytes)
    throw RuntimeError("tojson output exceeds the limit of " +
                       std::to_string(g_limits.max_string_bytes) + " bytes");
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

// --- UTF-8 -------------------------------------------------------------------------------------

std::vector<char32_t> decode_utf8(std::string_view s) {
  charge(s.size() / 4);
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    size_t maximal = 0;
    bool truncated = false;
    const size_t len = utf8_sequence(s, k, &maximal, &truncated);
    if (len == 0) {  // not UTF-8: one U+FFFD per byte
      out.push_back(0xfffd);
      ++k;
      continue;
    }
    out.push_back(utf8_code_point(s, k, len));
    k += len;
  }
  return out;
}

std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end; ++k) append_utf8(out, cps[k]);
  return out;
}

size_t count_code_points(std::string_view s) {
  charge(s.size() / 16);
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace dsinfer::jinja
