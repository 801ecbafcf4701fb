// Operators, attribute/item access, slicing and the bound dict/list/loop methods of the subset,
// with Python's semantics (and the jinja2 sandbox's refusals of mutating methods).
#include <algorithm>
#include <cmath>

#include "jinja/builtins.h"
#include "jinja/methods_internal.h"

namespace dsinfer::jinja {

using detail::int_of;
using detail::is_intlike;
using detail::str_method;

namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  throw RuntimeError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                     type_name(b) + "'");
}

double dbl_of(const Value& v) { return v.kind == Kind::Float ? v.f : double(int_of(v)); }

[[noreturn]] void overflow() {
  throw RuntimeError("integer overflow (this interpreter's integers are 64-bit)");
}

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0)
    return seq.kind == Kind::String
               ? Value::string("")
               : (seq.kind == Kind::Tuple ? Value::tuple({}) : Value::list({}));
  const ValueLimits& lim = value_limits();
  if (seq.kind == Kind::String) {
    if (!seq.str()->empty() && uint64_t(n) > lim.max_string_bytes / seq.str()->size())
      throw RuntimeError("string repetition exceeds the limit of " +
                         std::to_string(lim.max_string_bytes) + " bytes");
    std::string out;
    out.reserve(seq.str()->size() * size_t(n));
    for (int64_t k = 0; k < n; ++k) out += *seq.str();
    return Value::string(std::move(out), seq.markup);
  }
  if (!seq.items()->empty() && uint64_t(n) > lim.max_list_items / seq.items()->size())
    throw RuntimeError("list repetition exceeds the limit of " +
                       std::to_string(lim.max_list_items) + " items");
  ValueList out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.items()->begin(), seq.items()->end());
  return seq.kind == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python's float divmod.
void float_divmod(double x, double y, double& div, double& mod) {
  mod = std::fmod(x, y);
  double d = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      d -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (d != 0.0) {
    div = std::floor(d);
    if (d - div > 0.5) div += 1.0;
  } else {
    div = std::copysign(0.0, x / y);
  }
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw RuntimeError(*a.str());
  if (b.is_undefined()) throw RuntimeError(*b.str());
  const bool nums = a.is_number() && b.is_number();
  const bool ints = is_intlike(a) && is_intlike(b);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(dbl_of(a) + dbl_of(b));
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the str (markupsafe), plain str + str concatenates.
      if (a.markup || b.markup) {
        std::string l = a.markup ? *a.str() : html_escape(*a.str());
        std::string r = b.markup ? *b.str() : html_escape(*b.str());
        return Value::string(l + r, true);
      }
      return Value::string(*a.str() + *b.str());
    }
    if (a.kind == b.kind && a.is_sequence()) {
      ValueList out = *a.items();
      out.insert(out.end(), b.items()->begin(), b.items()->end());
      return a.kind == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if ((a.is_string() && !a.markup) || a.is_sequence())
      throw RuntimeError("can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                         "\") to " + type_name(a));
    type_error("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(dbl_of(a) - dbl_of(b));
    type_error("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(dbl_of(a) * dbl_of(b));
    if ((a.is_string() || a.is_sequence()) && is_intlike(b)) return repeat(a, int_of(b));
    if ((b.is_string() || b.is_sequence()) && is_intlike(a)) return repeat(b, int_of(a));
    type_error("*", a, b);
  }
  if (op == "/") {
    if (!nums) type_error("/", a, b);
    if (dbl_of(b) == 0.0) throw RuntimeError("division by zero");
    return Value::number(dbl_of(a) / dbl_of(b));
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) throw RuntimeError("unsupported string formatting with '%'");
    if (!nums) type_error(op, a, b);
    if (ints) {
      int64_t x = int_of(a), y = int_of(b);
      if (y == 0)
        throw RuntimeError(op == "%" ? "integer modulo by zero"
                                     : "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value::integer(0);
        overflow();
      }
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value::integer(op == "%" ? r : q);
    }
    double y = dbl_of(b);
    if (y == 0.0) throw RuntimeError(op == "%" ? "float modulo" : "float floor division by zero");
    double div, mod;
    float_divmod(dbl_of(a), y, div, mod);
    return Value::number(op == "%" ? mod : div);
  }
  if (op == "**") {
    if (!nums) type_error("** or pow()", a, b);
    if (ints && int_of(b) >= 0) {
      int64_t base = int_of(a), e = int_of(b), r = 1;
      while (e > 0) {
        if (e & 1)
          if (__builtin_mul_overflow(r, base, &r)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(r);
    }
    double x = dbl_of(a), y = dbl_of(b);
    if (x == 0.0 && y < 0) throw RuntimeError("0.0 cannot be raised to a negative power");
    if (x < 0 && std::floor(y) != y) throw RuntimeError("unsupported complex result of '**'");
    return Value::number(std::pow(x, y));
  }
  throw RuntimeError("unknown operator '" + op + "'");
}

Value unary_op(bool minus, const Value& v) {
  if (v.is_undefined()) throw RuntimeError(*v.str());
  if (is_intlike(v)) {
    int64_t x = int_of(v);
    if (minus && x == INT64_MIN) overflow();
    return Value::integer(minus ? -x : x);
  }
  if (v.kind == Kind::Float) return Value::number(minus ? -v.f : v.f);
  throw RuntimeError(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" +
                     type_name(v) + "'");
}

// --- attribute and item access -------------------------------------------------------------------

namespace {

const char* const kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const char* const kDictMethods[] = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                                    "pop",   "popitem", "setdefault", "update", "values"};
const char* const kListMethods[] = {"append", "clear", "copy",   "count",   "extend", "index",
                                    "insert", "pop",   "remove", "reverse", "sort"};
const char* const kUnsafe[] = {"append", "clear",   "extend",     "insert", "pop",   "popitem",
                               "remove", "reverse", "setdefault", "sort",   "update"};

template <size_t N>
bool in_list(const char* const (&list)[N], const std::string& name) {
  for (const char* n : list)
    if (name == n) return true;
  return false;
}

Value bound(const std::string& type, const std::string& name, const Value& self) {
  if (in_list(kUnsafe, name))
    return Value::undefined("access to attribute '" + name + "' of '" + type +
                            "' object is unsafe.");
  auto fn = std::make_shared<Callable>();
  fn->name = type + "." + name;
  fn->self = self;
  Value v;
  v.kind = Kind::Callable;
  v.ptr = std::move(fn);
  return v;
}

// Python methods of the receiver (nullopt-like Undefined kind when it has none of that name).
bool method_of(const Value& obj, const std::string& name, Value& out) {
  switch (obj.kind) {
    case Kind::String:
      if (in_list(kStrMethods, name)) {
        out = bound("str", name, obj);
        return true;
      }
      return false;
    case Kind::Dict:
      if (in_list(kDictMethods, name)) {
        out = bound("dict", name, obj);
        return true;
      }
      return false;
    case Kind::List:
    case Kind::Tuple:
      if (in_list(kListMethods, name) &&
          (obj.kind == Kind::List || name == "count" || name == "index")) {
        out = bound(type_name(obj), name, obj);
        return true;
      }
      return false;
    default:
      return false;
  }
}

Value undefined_item(const Value& obj, const Value& key) {
  std::string who = "'";
  who += obj.is_none() ? std::string("None") : type_name(obj) + " object";
  who += "'";
  if (key.is_string()) return Value::undefined(who + " has no attribute '" + key.s() + "'");
  return Value::undefined(who + " has no element " + repr(key));
}

Value loop_attr(const LoopState& l, const std::string& name, const Value& self) {
  const size_t n = l.items.size(), k = l.index0;
  if (name == "index") return Value::integer(int64_t(k + 1));
  if (name == "index0") return Value::integer(int64_t(k));
  if (name == "revindex") return Value::integer(int64_t(n - k));
  if (name == "revindex0") return Value::integer(int64_t(n - k - 1));
  if (name == "first") return Value::boolean(k == 0);
  if (name == "last") return Value::boolean(k + 1 == n);
  if (name == "length") return Value::integer(int64_t(n));
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem")
    return k > 0 ? l.items[k - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return k + 1 < n ? l.items[k + 1] : Value::undefined("there is no next item");
  if (name == "cycle") return bound("loop", "cycle", self);
  if (name == "changed") throw RuntimeError("unsupported 'loop.changed'");
  return Value::undefined("'LoopContext object' has no attribute '" + name + "'");
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw RuntimeError(*obj.str());
  if (!name.empty() && name[0] == '_')
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                            "' object is unsafe.");
  Value m;
  if (method_of(obj, name, m)) return m;
  switch (obj.kind) {
    case Kind::Dict:
      if (const Value* v = obj.dict()->find(std::string_view(name))) return *v;
      break;
    case Kind::Namespace:
      if (const Value* v = obj.ns()->attrs.find(std::string_view(name))) return *v;
      break;
    case Kind::Loop:
      return loop_attr(*obj.loop(), name, obj);
    default:
      break;
  }
  return undefined_item(obj, Value::string(name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw RuntimeError(*obj.str());
  if (key.is_undefined() && obj.kind != Kind::Dict) throw RuntimeError(*key.str());
  switch (obj.kind) {
    case Kind::Dict:
      if (const Value* v = obj.dict()->find(key)) return *v;
      break;
    case Kind::List:
    case Kind::Tuple:
    case Kind::String:
      if (is_intlike(key)) {
        int64_t k = int_of(key);
        if (obj.kind == Kind::String) {
          std::vector<char32_t> cps = decode_utf8(*obj.str());
          int64_t n = int64_t(cps.size());
          if (k < 0) k += n;
          if (k < 0 || k >= n) return undefined_item(obj, key);
          return Value::string(encode_utf8(cps, size_t(k), size_t(k) + 1));
        }
        int64_t n = int64_t(obj.items()->size());
        if (k < 0) k += n;
        if (k < 0 || k >= n) return undefined_item(obj, key);
        return (*obj.items())[size_t(k)];
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {  // jinja2 falls back to the attribute of that name
    if (obj.kind == Kind::Dict) {
      Value m;
      if (method_of(obj, key.s(), m)) return m;
      return undefined_item(obj, key);
    }
    return get_attr(obj, key.s());
  }
  return undefined_item(obj, key);
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) throw RuntimeError(*obj.str());
  // jinja2 compiles a slice to a plain Python subscript, so errors are Python's.
  if (obj.kind != Kind::String && !obj.is_sequence()) {
    if (obj.kind == Kind::Dict) throw RuntimeError("unhashable type: 'slice'");
    throw RuntimeError("'" + type_name(obj) + "' object is not subscriptable");
  }
  auto bound_of = [](const Value& v, bool& given) -> int64_t {
    given = false;
    if (v.is_none()) return 0;
    if (v.is_undefined()) throw RuntimeError(*v.str());
    if (!is_intlike(v))
      throw RuntimeError("slice indices must be integers or None or have an __index__ method");
    given = true;
    return int_of(v);
  };
  bool has_start, has_stop, has_step;
  int64_t a = bound_of(start, has_start), b = bound_of(stop, has_stop),
          s = bound_of(step, has_step);
  if (!has_step) s = 1;
  if (s == 0) throw RuntimeError("slice step cannot be zero");
  std::vector<char32_t> cps;
  int64_t n;
  if (obj.kind == Kind::String) {
    cps = decode_utf8(*obj.str());
    n = int64_t(cps.size());
  } else {
    n = int64_t(obj.items()->size());
  }
  auto clamp = [&](int64_t v, bool given, int64_t dflt) {
    if (!given) return dflt;
    if (v < 0) {
      v += n;
      if (v < 0) v = s < 0 ? -1 : 0;
    } else if (v >= n) {
      v = s < 0 ? n - 1 : n;
    }
    return v;
  };
  a = clamp(a, has_start, s < 0 ? n - 1 : 0);
  b = clamp(b, has_stop, s < 0 ? -1 : n);
  std::vector<size_t> picks;
  for (int64_t k = a; s > 0 ? k < b : k > b; k += s) picks.push_back(size_t(k));
  if (obj.kind == Kind::String) {
    std::string out;
    for (size_t k : picks) append_utf8(out, cps[k]);
    return Value::string(std::move(out));
  }
  ValueList out;
  for (size_t k : picks) out.push_back((*obj.items())[k]);
  return obj.kind == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// --- bound methods -------------------------------------------------------------------------------

Value call_method(const Callable& fn, CallArgs& args) {
  const std::string& name = fn.name;
  const size_t dot = name.find('.');
  const std::string type = name.substr(0, dot), m = name.substr(dot + 1);
  const Value& self = fn.self;
  if (type == "str") return str_method(m, self, args);
  if (type == "dict") {
    const Dict& d = *self.dict();
    if (m == "get") {
      Params p(name, args, {"key", "default"});
      if (!p.has(0)) throw RuntimeError("dict.get() takes at least 1 argument");
      const Value* v = d.find(*p.get(0));
      return v ? *v : (p.has(1) ? *p.get(1) : Value::none());
    }
    Params p(name, args, {});
    ValueList out;
    for (const auto& [k, v] : d.entries) {
      if (m == "items") {
        out.push_back(Value::tuple({k, v}));
      } else if (m == "keys") {
        out.push_back(k);
      } else if (m == "values") {
        out.push_back(v);
      } else {
        throw RuntimeError("unsupported method '" + name + "'");
      }
    }
    if (m != "items" && m != "keys" && m != "values")
      throw RuntimeError("unsupported method '" + name + "'");
    return Value::list(std::move(out));
  }
  if (type == "list" || type == "tuple") {
    Params p(name, args, {"value"});
    if (!p.has(0)) throw RuntimeError(name + "() takes exactly one argument");
    if (m == "count") {
      int64_t n = 0;
      for (const Value& v : *self.items()) n += equals(v, *p.get(0)) ? 1 : 0;
      return Value::integer(n);
    }
    if (m == "index") {
      for (size_t k = 0; k < self.items()->size(); ++k)
        if (equals((*self.items())[k], *p.get(0))) return Value::integer(int64_t(k));
      throw RuntimeError(repr(*p.get(0)) + " is not in " + type);
    }
    throw RuntimeError("unsupported method '" + name + "'");
  }
  if (name == "loop.cycle") {
    if (!args.kwargs.empty()) throw RuntimeError("loop.cycle() takes no keyword arguments");
    if (args.args.empty()) throw RuntimeError("no items for cycling given");
    return args.args[self.loop()->index0 % args.args.size()];
  }
  throw RuntimeError("unsupported method '" + name + "'");
}

}  // namespace dsinfer::jinja
