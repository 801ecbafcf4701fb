// Global functions and tests of the Jinja subset, as jinja2 3.1 defines them (with transformers'
// raise_exception), and the binding of call arguments; the filters are filters.cpp's.
#include "jinja/builtins.h"

#include "jinja/builtins_internal.h"
#include "jinja/parser.h"

namespace dsinfer::jinja {

using detail::int_or_fail;

// --- argument binding ------------------------------------------------------------------------

Params::Params(std::string function, CallArgs& args, std::vector<const char*> names)
    : function_(std::move(function)), slots_(names.size(), nullptr) {
  if (args.args.size() > names.size())
    throw RuntimeError(function_ + "() takes at most " + std::to_string(names.size()) +
                       " arguments (" + std::to_string(args.args.size()) + " given)");
  for (size_t k = 0; k < args.args.size(); ++k) slots_[k] = &args.args[k];
  for (auto& [key, value] : args.kwargs) {
    size_t k = 0;
    while (k < names.size() && key != names[k]) ++k;
    if (k == names.size())
      throw RuntimeError(function_ + "() got an unexpected keyword argument '" + key + "'");
    if (slots_[k])
      throw RuntimeError(function_ + "() got multiple values for argument '" + key + "'");
    slots_[k] = &value;
  }
}

const Value* Params::get(size_t k) const { return k < slots_.size() ? slots_[k] : nullptr; }

int64_t Params::get_int(size_t k, int64_t fallback) const {
  const Value* v = get(k);
  if (!v || v->is_none()) return fallback;
  if (v->kind == Kind::Int) return v->i;
  if (v->kind == Kind::Bool) return v->b ? 1 : 0;
  throw RuntimeError(function_ + "(): argument " + std::to_string(k + 1) +
                     " must be an integer, not " + type_name(*v));
}

bool Params::get_bool(size_t k, bool fallback) const {
  const Value* v = get(k);
  return v ? truthy(*v) : fallback;
}

std::string Params::get_string(size_t k, const std::string& fallback) const {
  const Value* v = get(k);
  return v ? to_str(*v) : fallback;
}

// --- globals -----------------------------------------------------------------------------------

namespace {

Value callable(const std::string& name) {
  auto fn = std::make_shared<Callable>();
  fn->name = name;
  Value v;
  v.kind = Kind::Callable;
  v.ptr = std::move(fn);
  return v;
}

// dict(...) / namespace(...): one optional mapping or iterable of pairs, then keyword arguments.
Dict dict_from(const std::string& fn, CallArgs& args) {
  if (args.args.size() > 1) throw RuntimeError(fn + "() expected at most 1 positional argument");
  Dict d;
  if (!args.args.empty()) {
    const Value& src = args.args[0];
    if (src.is_undefined()) throw RuntimeError(*src.str());  // dict() asks it for keys()
    if (src.kind == Kind::Dict) {
      d = *src.dict();
    } else {
      for (const Value& pair : iterate(src)) {
        if (!pair.is_sequence() || pair.items()->size() != 2)
          throw RuntimeError(fn + "(): sequence elements must be pairs");
        d.set((*pair.items())[0], (*pair.items())[1]);
      }
    }
  }
  for (auto& [k, v] : args.kwargs) d.set(Value::string(k), v);
  return d;
}

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE

thread_local std::vector<std::weak_ptr<NamespaceObj>> t_namespaces;

Value call_global(const std::string& name, CallArgs& args) {
  if (name == "range") {
    if (!args.kwargs.empty()) throw RuntimeError("range() takes no keyword arguments");
    for (const Value& a : args.args)
      if (a.kind != Kind::Int && a.kind != Kind::Bool)
        throw RuntimeError("range(): '" + type_name(a) +
                           "' object cannot be interpreted as an integer");
    auto iv = [&](size_t k) {
      return args.args[k].kind == Kind::Int ? args.args[k].i : int64_t(args.args[k].b);
    };
    int64_t start = 0, stop = 0, step = 1;
    if (args.args.size() == 1) {
      stop = iv(0);
    } else if (args.args.size() == 2 || args.args.size() == 3) {
      start = iv(0);
      stop = iv(1);
      if (args.args.size() == 3) step = iv(2);
    } else {
      throw RuntimeError("range() expects 1 to 3 arguments");
    }
    if (step == 0) throw RuntimeError("range() arg 3 must not be zero");
    ValueList out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (int64_t(out.size()) >= kMaxRange)
        throw RuntimeError("range too big, the sandbox allows at most " +
                           std::to_string(kMaxRange) + " items");
      out.push_back(Value::integer(k));
      if ((step > 0 && k > INT64_MAX - step) || (step < 0 && k < INT64_MIN - step)) break;
    }
    return Value::list(std::move(out));
  }
  if (name == "dict") return Value::dictionary(dict_from(name, args));
  if (name == "namespace") {
    auto ns = std::make_shared<NamespaceObj>();
    ns->attrs = dict_from(name, args);
    t_namespaces.push_back(ns);
    Value v;
    v.kind = Kind::Namespace;
    v.ptr = std::move(ns);
    return v;
  }
  if (name == "raise_exception") {
    Params p(name, args, {"message"});
    throw TemplateRaised(p.get_string(0, ""));
  }
  throw RuntimeError("unsupported function '" + name + "'");
}

}  // namespace

Value lookup_global(const std::string& name) {
  static const char* const kGlobals[] = {"range",  "dict",   "namespace", "raise_exception",
                                         "cycler", "joiner", "lipsum",    "strftime_now"};
  for (const char* g : kGlobals)
    if (name == g) return callable(name);
  return Value::undefined("'" + name + "' is undefined");
}

void release_namespaces() {
  // moved out first: clearing a namespace destroys values, which may be namespaces themselves
  std::vector<std::weak_ptr<NamespaceObj>> made;
  made.swap(t_namespaces);
  for (const auto& weak : made)
    if (auto ns = weak.lock()) ns->attrs.entries.clear();
}

Value call_value(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) throw RuntimeError(*fn.str());
  if (fn.kind != Kind::Callable)
    throw RuntimeError("'" + type_name(fn) + "' object is not callable");
  if (fn.fn()->name.find('.') != std::string::npos) return call_method(*fn.fn(), args);
  return call_global(fn.fn()->name, args);
}

// --- tests ---------------------------------------------------------------------------------------

int64_t detail::int_or_fail(const Value& v, const char* what) {
  if (v.is_undefined()) throw RuntimeError(*v.str());
  if (v.kind == Kind::Int) return v.i;
  if (v.kind == Kind::Bool) return v.b;
  throw RuntimeError(std::string(what) + ": expected a number, got '" + type_name(v) + "'");
}

namespace {

const char* const kTests[] = {
    "defined",  "undefined",   "none",    "boolean",  "false",    "true",        "integer", "float",
    "number",   "string",      "mapping", "iterable", "sequence", "callable",    "escaped", "odd",
    "even",     "divisibleby", "eq",      "equalto",  "==",       "ne",          "!=",      "lt",
    "lessthan", "<",           "le",      "<=",       "gt",       "greaterthan", ">",       "ge",
    ">=",       "in",          "sameas",  "lower",    "upper",    "filter",      "test"};

bool is_odd(const Value& v) {
  if (v.kind == Kind::Float) {
    Value m = binary_op("%", v, Value::integer(2));
    return m.f == 1.0;
  }
  return binary_op("%", Value::integer(int_or_fail(v, "odd")), Value::integer(2)).i == 1;
}

bool compare_test(const std::string& op, const Value& a, const Value& b) {
  if (op == "eq" || op == "equalto" || op == "==") return equals(a, b);
  if (op == "ne" || op == "!=") return !equals(a, b);
  if (op == "lt" || op == "lessthan" || op == "<") return less(a, b);
  if (op == "le" || op == "<=") return less(a, b) || equals(a, b);
  if (op == "gt" || op == "greaterthan" || op == ">") return less(b, a);
  return less(b, a) || equals(a, b);  // ge
}

}  // namespace

bool is_known_test(const std::string& name) {
  for (const char* t : kTests)
    if (name == t) return true;
  return false;
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  Params p("test " + name, args, {"other"});
  const Value* other = p.get(0);
  auto need_other = [&]() -> const Value& {
    if (!other) throw RuntimeError("test '" + name + "' needs an argument");
    return *other;
  };
  const Kind k = v.kind;
  if (name == "defined") return k != Kind::Undefined;
  if (name == "undefined") return k == Kind::Undefined;
  if (name == "none") return k == Kind::None;
  if (name == "boolean") return k == Kind::Bool;
  if (name == "false") return k == Kind::Bool && !v.b;
  if (name == "true") return k == Kind::Bool && v.b;
  if (name == "integer") return k == Kind::Int;
  if (name == "float") return k == Kind::Float;
  if (name == "number") return k == Kind::Int || k == Kind::Float || k == Kind::Bool;
  if (name == "string") return k == Kind::String;
  if (name == "mapping") return k == Kind::Dict;
  if (name == "iterable" || name == "sequence")
    return k == Kind::String || k == Kind::List || k == Kind::Tuple || k == Kind::Dict ||
           k == Kind::Undefined || (name == "iterable" && k == Kind::Loop);
  if (name == "callable") return k == Kind::Callable || k == Kind::Undefined || k == Kind::Loop;
  if (name == "escaped") return k == Kind::String && v.markup;
  if (name == "odd") return is_odd(v);
  if (name == "even") return !is_odd(v);
  if (name == "divisibleby") {
    Value m = binary_op("%", v, need_other());
    return m.kind == Kind::Float ? m.f == 0.0 : m.i == 0;
  }
  if (name == "in") return contains(need_other(), v);
  if (name == "sameas") {
    const Value& o = need_other();
    if (v.kind != o.kind) return false;
    switch (k) {
      case Kind::None:
      case Kind::Undefined:
        return true;
      case Kind::Bool:
        return v.b == o.b;
      case Kind::Int:
        return v.i == o.i;
      case Kind::Float:
        return v.f == o.f;
      case Kind::String:
        return v.str() == o.str() || *v.str() == *o.str();
      case Kind::List:
      case Kind::Tuple:
        return v.items() == o.items();
      case Kind::Dict:
        return v.dict() == o.dict();
      default:
        return equals(v, o);
    }
  }
  if (name == "lower" || name == "upper") {
    CallArgs none;
    Callable fn{"str.is" + name, Value::string(to_str(v))};
    return truthy(call_method(fn, none));
  }
  if (name == "filter") return is_known_filter(to_str(v));
  if (name == "test") return is_known_test(to_str(v));
  return compare_test(name, v, need_other());
}

}  // namespace dsinfer::jinja
