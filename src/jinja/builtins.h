// Operations of the Jinja subset on values: operators, attribute and item access, slicing, the
// Python methods templates call (str.split, dict.get, ...), filters, tests and global functions.
// All raise jinja::RuntimeError where Python/jinja2 would raise; the evaluator adds the position.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace dsinfer::jinja {

struct CallArgs {
  ValueList args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// --- methods.cpp, str_methods.cpp ---
// Every namespace() made by this thread's renders is remembered until release_namespaces(),
// which empties them: `{% set ns.x = ns %}` makes a reference cycle that shared_ptr alone never
// frees (a leak per render, found by fuzz_jinja). render() calls it when it ends.
void release_namespaces();

Value binary_op(const std::string& op, const Value& a, const Value& b);  // + - * / // % **
Value unary_op(bool minus, const Value& v);                              // -v, +v
Value get_attr(const Value& obj, const std::string& name);               // obj.name
Value get_item(const Value& obj, const Value& key);                      // obj[key]
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value call_method(const Callable& fn, CallArgs& args);   // bound methods
std::string case_map(const std::string& s, bool upper);  // str.upper() / str.lower()
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count);
std::vector<std::string> py_splitlines(const std::string& s);

// --- builtins.cpp (globals, tests), filters.cpp ---
Value lookup_global(const std::string& name);  // range, dict, namespace, raise_exception, ...
Value call_value(const Value& fn, CallArgs& args);
Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
bool apply_test(const std::string& name, const Value& value, CallArgs& args);

// Thrown by raise_exception(msg): the message is the template author's.
class TemplateRaised : public RuntimeError {
 public:
  explicit TemplateRaised(const std::string& message) : RuntimeError(message) {}
};

// Reads a call's arguments by position or keyword, Python style.
class Params {
 public:
  Params(std::string function, CallArgs& args, std::vector<const char*> names);
  const Value* get(size_t k) const;  // nullptr when not given
  bool has(size_t k) const { return get(k) != nullptr; }
  int64_t get_int(size_t k, int64_t fallback) const;
  bool get_bool(size_t k, bool fallback) const;
  std::string get_string(size_t k, const std::string& fallback) const;
  const std::string& function() const { return function_; }

 private:
  std::string function_;
  std::vector<const Value*> slots_;
};

}  // namespace dsinfer::jinja
