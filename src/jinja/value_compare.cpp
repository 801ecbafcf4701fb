// Python comparisons of values: equality, ordering, membership (`in`), and what iterating a
// value yields.
#include <algorithm>

#include "jinja/value.h"
#include "jinja/value_internal.h"

namespace dsinfer::jinja {

using detail::DepthGuard;
using detail::g_depth;

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

}  // namespace dsinfer::jinja
