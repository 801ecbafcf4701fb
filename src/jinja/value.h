// Values of the Jinja subset interpreter (chat_template.h), with Python semantics: what jinja2
// running under Python does with str, int, float, bool, None, list, tuple, dict, its Undefined and
// namespace objects. Strings are UTF-8; lengths, indices and slices count code points as Python's
// str does. Containers are immutable once built (transformers renders in an immutable sandbox), so
// they are shared by pointer; only namespace objects are mutable.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace dsinfer::jinja {

// A runtime error without a position yet; the evaluator adds the template position of the
// innermost expression being evaluated and rethrows it as dsinfer::Error.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message) : std::runtime_error(message) {}
};

struct Value;
struct Dict;
struct NamespaceObj;
struct Callable;
struct LoopState;

using ValueList = std::vector<Value>;

enum class Kind : uint8_t {
  Undefined,  // jinja2's default Undefined: falsy, prints "", most operations raise
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Tuple,
  Dict,
  Namespace,  // jinja2 namespace(): the one mutable object
  Callable,   // globals (range, namespace, ...), bound methods (str.split, dict.items, loop.cycle)
  Loop,       // the `loop` variable of a for loop
};

struct Value {
  Kind kind = Kind::Undefined;
  bool markup = false;  // String only: a jinja2 Markup (from |safe or |escape)
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  // The payload of String (std::string; Undefined: the message of the error it raises), List and
  // Tuple (ValueList), Dict, Namespace (NamespaceObj), Callable and Loop (LoopState).
  std::shared_ptr<const void> ptr;

  static Value undefined(std::string message);  // message: e.g. "'foo' is undefined"
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v, bool markup = false);
  static Value list(ValueList v);
  static Value tuple(ValueList v);
  static Value dictionary(Dict d);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_sequence() const { return kind == Kind::List || kind == Kind::Tuple; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  const std::string* str() const { return static_cast<const std::string*>(ptr.get()); }
  const ValueList* items() const { return static_cast<const ValueList*>(ptr.get()); }
  const Dict* dict() const { return static_cast<const Dict*>(ptr.get()); }
  NamespaceObj* ns() const { return static_cast<NamespaceObj*>(const_cast<void*>(ptr.get())); }
  const Callable* fn() const { return static_cast<const Callable*>(ptr.get()); }
  LoopState* loop() const { return static_cast<LoopState*>(const_cast<void*>(ptr.get())); }
  const std::string& s() const { return *str(); }
};

// An insertion-ordered dict (Python 3.7+ dicts keep insertion order). Keys are usually strings;
// other hashable keys (numbers, bools, None) compare by Python equality.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces an equal key in place, else appends
};

struct NamespaceObj {
  Dict attrs;
};

// Something callable: a global function, or a method bound to a receiver.
struct Callable {
  std::string name;  // "range", "namespace", "str.split", "dict.items", "loop.cycle", ...
  Value self;        // the receiver of a bound method
};

struct LoopState {
  ValueList items;  // the (filtered) sequence being iterated
  size_t index0 = 0;
};

// Limits shared by the value operations (set per render by the evaluator).
struct ValueLimits {
  size_t max_string_bytes = size_t(1) << 20;
  size_t max_list_items = size_t(1) << 20;
  int max_depth = 256;  // nesting of containers converted from JSON, printed or serialised
  // Work units (a byte of string built or scanned, a list item copied or compared) per render:
  // bounds the time a hostile template can take even below the other limits.
  uint64_t max_work = uint64_t(1) << 27;
};
const ValueLimits& value_limits();
void set_value_limits(const ValueLimits& limits);
void reset_work();            // at the start of each parse and render
void charge(uint64_t units);  // throws RuntimeError past max_work

// --- conversions ---------------------------------------------------------------------------
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);
std::string type_name(
    const Value& v);  // Python's type name: "str", "int", "dict", "Undefined", ...

// --- Python semantics ----------------------------------------------------------------------
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); Undefined -> ""
std::string repr(const Value& v);    // repr(v), as str() of a container prints its items
std::string float_repr(double d);    // Python repr(float): shortest round-trip, "1e-05", "1.0"
std::string string_repr(std::string_view s);
bool equals(const Value& a, const Value& b);  // Python ==; Undefined == Undefined only
bool less(const Value& a, const Value& b);    // Python <, RuntimeError where Python raises
bool contains(const Value& container, const Value& item);  // Python `item in container`
Value make_undefined_attr(const Value& obj, const std::string& attr);

// Items of an iteration (`for x in v`, |list): list/tuple items, dict keys, string characters;
// Undefined iterates as empty. Other types raise.
ValueList iterate(const Value& v);

// Options of transformers' tojson (json.dumps with ensure_ascii=False by default).
struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // used when has_indent
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

// --- UTF-8 helpers (Python str semantics over UTF-8 bytes) ----------------------------------
std::vector<char32_t> decode_utf8(std::string_view s);  // invalid bytes decode as U+FFFD
std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t count_code_points(std::string_view s);
bool is_py_space(char32_t c);  // Python str.isspace()
std::string html_escape(std::string_view s);

}  // namespace dsinfer::jinja
