// Filters of the Jinja subset, as jinja2 3.1 defines them, with transformers' tojson (json.dumps,
// ensure_ascii=False).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "jinja/builtins.h"
#include "jinja/builtins_internal.h"
#include "jinja/parser.h"

namespace dsinfer::jinja {

using detail::int_or_fail;

// --- filters -------------------------------------------------------------------------------------

namespace {

const char* const kFilters[] = {
    "abs",     "attr",    "capitalize", "count",  "d",      "default",    "dictsort", "e",
    "escape",  "first",   "float",      "indent", "int",    "items",      "join",     "last",
    "length",  "list",    "lower",      "map",    "max",    "min",        "reject",   "rejectattr",
    "replace", "reverse", "round",      "safe",   "select", "selectattr", "sort",     "string",
    "sum",     "title",   "tojson",     "trim",   "unique", "upper"};

}  // namespace

bool is_known_filter(const std::string& name) {
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}

namespace {

// jinja2's attribute getter for attribute="a.b.0" arguments: item lookup per dotted part.
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort key: the attribute (if any), lower-cased when a string and not case-sensitive.
Value sort_key(const Value& item, const Value* attribute, bool case_sensitive) {
  Value key = attribute && !attribute->is_none() ? attr_path(item, to_str(*attribute)) : item;
  if (!case_sensitive && key.is_string()) return Value::string(case_map(*key.str(), false));
  return key;
}

ValueList sorted(ValueList items, const Value* attribute, bool case_sensitive, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& it : items) keyed.emplace_back(sort_key(it, attribute, case_sensitive), std::move(it));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first) : less(a.first, b.first);
  });
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// select/reject/selectattr/rejectattr: args = [attribute (for *attr)], test name, test args...
Value select_filter(const std::string& name, const Value& v, CallArgs& args) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  size_t pos = 0;
  std::string attribute;
  if (by_attr) {
    if (args.args.empty()) throw RuntimeError(name + "() needs an attribute name");
    attribute = to_str(args.args[pos++]);
  }
  std::string test;
  if (pos < args.args.size()) test = to_str(args.args[pos++]);
  if (!test.empty() && !is_known_test(test)) throw RuntimeError("unsupported test '" + test + "'");
  CallArgs rest;
  rest.args.assign(args.args.begin() + std::ptrdiff_t(pos), args.args.end());
  rest.kwargs = args.kwargs;
  ValueList out;
  for (const Value& item : iterate(v)) {
    Value x = by_attr ? attr_path(item, attribute) : item;
    CallArgs a = rest;
    bool ok = test.empty() ? truthy(x) : apply_test(test, x, a);
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_filter(const Value& v, CallArgs& args) {
  ValueList items = iterate(v);
  ValueList out;
  for (const auto& [k, val] : args.kwargs) {
    if (k == "attribute") {
      if (!args.args.empty()) throw RuntimeError("map(): attribute= takes no positional arguments");
      const Value* dflt = nullptr;
      for (const auto& [k2, v2] : args.kwargs) {
        if (k2 == "default")
          dflt = &v2;
        else if (k2 != "attribute")
          throw RuntimeError("map() got an unexpected keyword argument '" + k2 + "'");
      }
      for (const Value& item : items) {
        Value x = attr_path(item, to_str(val));
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
      return Value::list(std::move(out));
    }
  }
  if (args.args.empty()) throw RuntimeError("map(): missing filter name or attribute=");
  const std::string filter = to_str(args.args[0]);
  if (!is_known_filter(filter)) throw RuntimeError("unsupported filter '" + filter + "'");
  for (const Value& item : items) {
    CallArgs a;
    a.args.assign(args.args.begin() + 1, args.args.end());
    a.kwargs = args.kwargs;
    out.push_back(apply_filter(filter, item, a));
  }
  return Value::list(std::move(out));
}

Value tojson_filter(const Value& v, CallArgs& args) {
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = p.get_bool(0, false);
  if (const Value* ind = p.get(1); ind && !ind->is_none()) {
    o.has_indent = true;
    if (ind->is_string()) {
      o.indent = *ind->str();
    } else {
      o.indent = std::string(size_t(std::max<int64_t>(0, p.get_int(1, 0))), ' ');
    }
    o.item_separator = ",";
  }
  if (const Value* sep = p.get(2); sep && !sep->is_none()) {
    if (!sep->is_sequence() || sep->items()->size() != 2 || !(*sep->items())[0].is_string() ||
        !(*sep->items())[1].is_string())
      throw RuntimeError("tojson(): separators must be a pair of strings");
    o.item_separator = *(*sep->items())[0].str();
    o.key_separator = *(*sep->items())[1].str();
  }
  o.sort_keys = p.get_bool(3, false);
  return Value::string(to_json(v, o));
}

Value length_of(const Value& v) {
  switch (v.kind) {
    case Kind::String:
      return Value::integer(int64_t(count_code_points(*v.str())));
    case Kind::List:
    case Kind::Tuple:
      return Value::integer(int64_t(v.items()->size()));
    case Kind::Dict:
      return Value::integer(int64_t(v.dict()->entries.size()));
    case Kind::Undefined:
      return Value::integer(0);
    case Kind::Loop:
      return Value::integer(int64_t(v.loop()->items.size()));
    default:
      throw RuntimeError("object of type '" + type_name(v) + "' has no len()");
  }
}

// Python int(str, base) / float(str); false when the text is not a number.
bool parse_int(std::string s, int base, int64_t& out) {
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  s = s.substr(b, e - b + 1);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_float(std::string s, double& out) {
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  s = s.substr(b, e - b + 1);
  if (s.size() > 1 && (s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) return false;  // no hex floats
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

Value number_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (v.is_undefined()) throw RuntimeError(*v.str());
  if (name == "int") {
    Params p("int", args, {"default", "base"});
    Value dflt = p.has(0) ? *p.get(0) : Value::integer(0);
    int64_t base = p.get_int(1, 10);
    if (v.kind == Kind::Int || v.kind == Kind::Bool)
      return Value::integer(v.kind == Kind::Int ? v.i : v.b);
    if (v.kind == Kind::Float) {
      if (std::isnan(v.f)) return dflt;
      if (std::isinf(v.f) || std::fabs(v.f) >= 9.2e18)
        throw RuntimeError("cannot convert float to a 64-bit integer");
      return Value::integer(int64_t(v.f));
    }
    if (v.is_string()) {
      int64_t i;
      if (parse_int(*v.str(), int(base), i)) return Value::integer(i);
      double d;
      if (parse_float(*v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value::integer(int64_t(d));
    }
    return dflt;
  }
  if (name == "float") {
    Params p("float", args, {"default"});
    Value dflt = p.has(0) ? *p.get(0) : Value::number(0.0);
    if (v.is_number())
      return Value::number(v.kind == Kind::Float ? v.f : double(v.kind == Kind::Int ? v.i : v.b));
    double d;
    if (v.is_string() && parse_float(*v.str(), d)) return Value::number(d);
    return dflt;
  }
  if (name == "abs") {
    Params p("abs", args, {});
    if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
    if (!v.is_number()) throw RuntimeError("bad operand type for abs(): '" + type_name(v) + "'");
    return unary_op(int_or_fail(v, "abs") < 0, v);
  }
  // round
  Params p("round", args, {"precision", "method"});
  int64_t precision = p.get_int(0, 0);
  std::string method = p.get_string(1, "common");
  if (!v.is_number()) throw RuntimeError("round(): expected a number, got '" + type_name(v) + "'");
  if (method == "common" && v.kind != Kind::Float)
    return Value::integer(v.kind == Kind::Int ? v.i : v.b);
  double x = v.kind == Kind::Float ? v.f : double(v.kind == Kind::Int ? v.i : v.b);
  if (method == "common") {
    if (!std::isfinite(x) || precision > 300) return Value::number(x);
    if (precision < 0) {
      double scale = std::pow(10.0, double(-precision));
      return Value::number(std::nearbyint(x / scale) * scale);
    }
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", int(precision), x);  // exact, ties to even, as Python
    return Value::number(std::strtod(buf, nullptr));
  }
  if (method != "floor" && method != "ceil")
    throw RuntimeError("round(): method must be common, ceil or floor");
  double scale = std::pow(10.0, double(precision));
  double r = method == "floor" ? std::floor(x * scale) : std::ceil(x * scale);
  return Value::number(r / scale);
}

std::string indent_text(const std::string& s, const Value& width, bool first, bool blank) {
  std::string ind =
      width.is_string() ? *width.str() : std::string(size_t(std::max<int64_t>(0, width.i)), ' ');
  std::vector<std::string> lines = py_splitlines(s + "\n");
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) out += "\n";
    if (k == 0 || (!blank && lines[k].empty())) {
      out += lines[k];
    } else {
      out += ind + lines[k];
    }
  }
  return first ? ind + out : out;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  auto noargs = [&]() { Params p(name, args, {}); };
  if (name == "length" || name == "count") {
    noargs();
    return length_of(v);
  }
  if (name == "string") {
    noargs();
    return Value::string(to_str(v), v.is_string() && v.markup);
  }
  if (name == "safe") {
    noargs();
    return Value::string(to_str(v), true);
  }
  if (name == "escape" || name == "e") {
    noargs();
    if (v.is_string() && v.markup) return v;
    return Value::string(html_escape(to_str(v)), true);
  }
  if (name == "tojson") return tojson_filter(v, args);
  if (name == "trim") {
    Params p(name, args, {"chars"});
    return Value::string(py_strip(to_str(v), p.has(0) ? *p.get(0) : Value::none(), true, true));
  }
  if (name == "upper" || name == "lower") {
    noargs();
    return Value::string(case_map(to_str(v), name == "upper"));
  }
  if (name == "capitalize" || name == "title") {
    noargs();
    std::vector<char32_t> cps = decode_utf8(to_str(v));
    std::string out;
    bool word_start = true;
    for (size_t k = 0; k < cps.size(); ++k) {
      char32_t c = cps[k];
      bool sep = name == "title" &&
                 (is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<');
      std::string one;
      append_utf8(one, c);
      bool up = name == "title" ? word_start : k == 0;
      out += case_map(one, up);
      word_start = sep;
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    Params p(name, args, {"old", "new", "count"});
    if (!p.has(0) || !p.has(1)) throw RuntimeError("replace() needs the old and new strings");
    return Value::string(
        py_replace(to_str(v), to_str(*p.get(0)), to_str(*p.get(1)), p.get_int(2, -1)));
  }
  if (name == "indent") {
    Params p(name, args, {"width", "first", "blank"});
    Value width = p.has(0) ? *p.get(0) : Value::integer(4);
    if (!width.is_string() && width.kind != Kind::Int)
      throw RuntimeError("indent(): width must be an int or a string");
    if (v.is_undefined()) throw RuntimeError(*v.str());
    if (!v.is_string())  // jinja2 appends "\n" to the value itself
      throw RuntimeError("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
    return Value::string(indent_text(to_str(v), width, p.get_bool(1, false), p.get_bool(2, false)));
  }
  if (name == "default" || name == "d") {
    Params p(name, args, {"default_value", "boolean"});
    bool use = v.is_undefined() || (p.get_bool(1, false) && !truthy(v));
    return use ? (p.has(0) ? *p.get(0) : Value::string("")) : v;
  }
  if (name == "first" || name == "last") {
    noargs();
    ValueList items = iterate(v);
    if (items.empty())
      return Value::undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    noargs();
    return Value::list(iterate(v));
  }
  if (name == "reverse") {
    noargs();
    if (v.is_string()) {
      std::vector<char32_t> cps = decode_utf8(*v.str());
      std::reverse(cps.begin(), cps.end());
      return Value::string(encode_utf8(cps, 0, cps.size()));
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "join") {
    Params p(name, args, {"d", "attribute"});
    std::string sep = p.get_string(0, "");
    std::string out;
    ValueList items = iterate(v);
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out += sep;
      out += to_str(p.has(1) && !p.get(1)->is_none() ? attr_path(items[k], to_str(*p.get(1)))
                                                     : items[k]);
      if (out.size() > value_limits().max_string_bytes) break;  // Value::string reports it
    }
    return Value::string(std::move(out));
  }
  if (name == "items") {
    noargs();
    if (v.is_undefined()) return Value::list({});
    if (v.kind != Kind::Dict) throw RuntimeError("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, val] : v.dict()->entries) out.push_back(Value::tuple({k, val}));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    Params p(name, args, {"case_sensitive", "by", "reverse"});
    if (v.is_undefined()) throw RuntimeError(*v.str());
    if (v.kind != Kind::Dict)
      throw RuntimeError("dictsort(): expected a mapping, got '" + type_name(v) + "'");
    std::string by = p.get_string(1, "key");
    if (by != "key" && by != "value")
      throw RuntimeError("You can only sort by either \"key\" or \"value\"");
    Value index = Value::integer(by == "key" ? 0 : 1);
    ValueList pairs;
    for (const auto& [k, val] : v.dict()->entries) pairs.push_back(Value::tuple({k, val}));
    Value attr = Value::string(by == "key" ? "0" : "1");
    return Value::list(sorted(std::move(pairs), &attr, p.get_bool(0, false), p.get_bool(2, false)));
  }
  if (name == "sort") {
    Params p(name, args, {"reverse", "case_sensitive", "attribute"});
    return Value::list(sorted(iterate(v), p.get(2), p.get_bool(1, false), p.get_bool(0, false)));
  }
  if (name == "unique") {
    Params p(name, args, {"case_sensitive", "attribute"});
    ValueList out, seen;
    for (const Value& item : iterate(v)) {
      Value key = sort_key(item, p.get(1), p.get_bool(0, false));
      bool dup = false;
      for (const Value& s : seen) dup = dup || equals(s, key);
      if (!dup) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "max" || name == "min") {
    Params p(name, args, {"case_sensitive", "attribute"});
    ValueList items = sorted(iterate(v), p.get(1), p.get_bool(0, false), false);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    // Python's max() returns the first maximal item; a stable ascending sort puts it first among
    // equals.
    if (name == "min") return items.front();
    Value best = items.back();
    Value best_key = sort_key(best, p.get(1), p.get_bool(0, false));
    for (const Value& it : items)
      if (equals(sort_key(it, p.get(1), p.get_bool(0, false)), best_key)) return it;
    return best;
  }
  if (name == "sum") {
    Params p(name, args, {"attribute", "start"});
    Value total = p.has(1) ? *p.get(1) : Value::integer(0);
    for (const Value& item : iterate(v))
      total = binary_op(
          "+", total, p.has(0) && !p.get(0)->is_none() ? attr_path(item, to_str(*p.get(0))) : item);
    return total;
  }
  if (name == "map") return map_filter(v, args);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select_filter(name, v, args);
  if (name == "attr") {
    Params p(name, args, {"name"});
    if (!p.has(0)) throw RuntimeError("attr() needs a name");
    if (v.is_undefined()) throw RuntimeError(*v.str());
    std::string attr = to_str(*p.get(0));
    if (v.kind == Kind::Dict) {  // attributes only: dict keys are items, not attributes
      Value probe = get_attr(Value::dictionary(Dict{}), attr);
      return probe.kind == Kind::Callable ? get_attr(v, attr) : make_undefined_attr(v, attr);
    }
    return get_attr(v, attr);
  }
  if (name == "int" || name == "float" || name == "abs" || name == "round")
    return number_filter(name, v, args);
  throw RuntimeError("unsupported filter '" + name + "'");
}

}  // namespace dsinfer::jinja
