// The core of the Jinja subset's values: construction (with the size limits and the work budget),
// Dict, values from JSON, type names, truthiness and UTF-8 helpers.
#include "jinja/value.h"

#include "jinja/value_internal.h"

namespace dsinfer::jinja {

namespace detail {
thread_local int g_depth = 0;
}  // namespace detail

using detail::DepthGuard;
using detail::g_depth;

namespace {

thread_local ValueLimits g_limits;
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

// --- truthiness ----------------------------------------------------------------------------------

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
