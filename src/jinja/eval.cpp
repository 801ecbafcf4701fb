// Evaluator of the Jinja subset (see eval.h).
#include "jinja/eval.h"

#include <unordered_map>

#include "core/error.h"
#include "jinja/builtins.h"

namespace dsinfer::jinja {

namespace {

using Scope = std::unordered_map<std::string, Value>;

class Renderer {
 public:
  Renderer(const std::string& src, const RenderLimits& limits) : src_(src), limits_(limits) {}

  std::string run(const Body& body, const Value& context) {
    Scope globals;
    if (context.kind == Kind::Dict) {
      for (const auto& [k, v] : context.dict()->entries)
        if (k.is_string()) globals[*k.str()] = v;
    }
    scopes_.push_back(std::move(globals));
    scopes_.push_back({});  // the template's own top-level variables
    exec(body);
    return std::move(out_);
  }

 private:
  enum class Flow { Normal, Break, Continue };

  [[noreturn]] void fail(size_t pos, const std::string& message) const {
    fail_at(src_, pos, message);
  }

  void emit(const std::string& s) {
    if (out_.size() + s.size() > limits_.max_output_bytes)
      throw RuntimeError("rendered output exceeds the limit of " +
                         std::to_string(limits_.max_output_bytes) + " bytes");
    out_ += s;
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return lookup_global(name);
  }

  // --- statements ---

  Flow exec(const Body& body) {
    for (const StmtPtr& s : body) {
      Flow f = exec_stmt(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec_stmt(const Stmt& s) {
    try {
      return exec_stmt_inner(s);
    } catch (const TemplateRaised& e) {
      fail(s.pos, std::string("raise_exception: ") + e.what());
    } catch (const RuntimeError& e) {
      fail(s.pos, e.what());
    }
  }

  Flow exec_stmt_inner(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::Text:
        emit(s.text);
        return Flow::Normal;
      case StmtKind::Print:
        for (const ExprPtr& e : s.exprs) emit(to_str(eval(*e)));
        return Flow::Normal;
      case StmtKind::If:
        for (size_t k = 0; k < s.exprs.size(); ++k)
          if (truthy(eval(*s.exprs[k]))) return exec(s.bodies[k]);
        if (s.bodies.size() > s.exprs.size()) return exec(s.bodies.back());
        return Flow::Normal;
      case StmtKind::For:
        return exec_for(s);
      case StmtKind::Set:
        assign(s, eval(*s.exprs[0]));
        return Flow::Normal;
      case StmtKind::SetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        exec(s.bodies[0]);
        Value block = Value::string(std::move(out_));
        out_ = std::move(saved);
        if (!s.exprs.empty()) {
          Value saved_block = block_value_;
          block_value_ = block;
          block = eval(*s.exprs[0]);
          block_value_ = saved_block;
        }
        assign(s, block);
        return Flow::Normal;
      }
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
      case StmtKind::Scope:
        return exec(s.bodies[0]);
    }
    return Flow::Normal;
  }

  void bind(Scope& scope, const Stmt& s, const Value& v) {
    if (!s.unpack) {
      scope[s.targets[0]] = v;
      return;
    }
    ValueList parts = iterate(v);
    const size_t want = s.targets.size();
    if (parts.size() > want)
      throw RuntimeError("too many values to unpack (expected " + std::to_string(want) + ")");
    if (parts.size() < want)
      throw RuntimeError("not enough values to unpack (expected " + std::to_string(want) +
                         ", got " + std::to_string(parts.size()) + ")");
    for (size_t k = 0; k < want; ++k) scope[s.targets[k]] = parts[k];
  }

  void assign(const Stmt& s, const Value& v) {
    if (!s.ns_name.empty()) {
      Value ns = lookup(s.ns_name);
      if (ns.kind != Kind::Namespace)
        throw RuntimeError("cannot assign attribute on non-namespace object");
      ns.ns()->attrs.set(Value::string(s.ns_attr), v);
      return;
    }
    bind(scopes_.back(), s, v);
  }

  Flow exec_for(const Stmt& s) {
    Value seq = eval(*s.exprs[0]);
    ValueList items;
    try {
      items = iterate(seq);
    } catch (const RuntimeError& e) {
      fail(s.exprs[0]->pos, e.what());
    }
    if (s.exprs[1]) {  // {% for x in xs if cond %}: filtered before the loop counts anything
      ValueList kept;
      for (const Value& item : items) {
        count_iteration(s);
        scopes_.emplace_back();
        bind(scopes_.back(), s, item);
        bool keep = truthy(eval(*s.exprs[1]));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (s.bodies.size() > 1) {
        scopes_.emplace_back();
        Flow f = exec(s.bodies[1]);
        scopes_.pop_back();
        (void)f;
      }
      return Flow::Normal;
    }
    auto state = std::make_shared<LoopState>();
    state->items = std::move(items);
    Value loop;
    loop.kind = Kind::Loop;
    loop.ptr = state;
    for (size_t k = 0; k < state->items.size(); ++k) {
      count_iteration(s);
      state->index0 = k;
      scopes_.emplace_back();
      bind(scopes_.back(), s, state->items[k]);
      scopes_.back()["loop"] = loop;
      Flow f = exec(s.bodies[0]);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void count_iteration(const Stmt& s) {
    if (++iterations_ > limits_.max_loop_iterations)
      fail(s.pos,
           "loop iterations exceed the limit of " + std::to_string(limits_.max_loop_iterations));
  }

  // --- expressions ---

  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (const TemplateRaised& r) {
      fail(e.pos, std::string("raise_exception: ") + r.what());
    } catch (const RuntimeError& r) {
      fail(e.pos, r.what());
    }
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t k = first; k < e.children.size(); ++k) a.args.push_back(eval(*e.children[k]));
    for (const auto& [key, x] : e.kwargs) a.kwargs.emplace_back(key, eval(*x));
    return a;
  }

  static bool orderable(const Value& a, const Value& b) {
    return (a.is_number() && b.is_number()) || (a.is_string() && b.is_string()) ||
           (a.is_sequence() && a.kind == b.kind);
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") return !contains(b, a);
    if (a.is_undefined()) throw RuntimeError(*a.str());
    if (b.is_undefined()) throw RuntimeError(*b.str());
    if (!orderable(a, b))
      throw RuntimeError("'" + op + "' not supported between instances of '" + type_name(a) +
                         "' and '" + type_name(b) + "'");
    if (op == "<") return less(a, b);
    if (op == "<=") return less(a, b) || equals(a, b);
    if (op == ">") return less(b, a);
    return less(b, a) || equals(a, b);
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Const:
        return e.value;
      case ExprKind::Name:
        return lookup(e.name);
      case ExprKind::BlockValue:
        return block_value_;
      case ExprKind::List:
      case ExprKind::Tuple: {
        ValueList items;
        for (const ExprPtr& c : e.children) items.push_back(eval(*c));
        return e.kind == ExprKind::List ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
      }
      case ExprKind::Dict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.children.size(); k += 2) {
          Value key = eval(*e.children[k]);
          if (key.kind == Kind::List || key.kind == Kind::Dict || key.kind == Kind::Namespace ||
              key.kind == Kind::Undefined)
            throw RuntimeError("unhashable type: '" + type_name(key) + "'");
          d.set(std::move(key), eval(*e.children[k + 1]));
        }
        return Value::dictionary(std::move(d));
      }
      case ExprKind::GetAttr:
        return get_attr(eval(*e.children[0]), e.name);
      case ExprKind::GetItem: {
        Value obj = eval(*e.children[0]);
        return get_item(obj, eval(*e.children[1]));
      }
      case ExprKind::Slice: {
        Value obj = eval(*e.children[0]);
        Value part[3];
        for (int k = 0; k < 3; ++k)
          part[k] = e.children[size_t(k) + 1] ? eval(*e.children[size_t(k) + 1]) : Value::none();
        return slice_value(obj, part[0], part[1], part[2]);
      }
      case ExprKind::Call: {
        Value fn = eval(*e.children[0]);
        CallArgs args = eval_args(e, 1);
        return call_value(fn, args);
      }
      case ExprKind::Filter: {
        Value target = e.children[0] ? eval(*e.children[0]) : block_value_;
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, target, args);
      }
      case ExprKind::Test: {
        Value target = eval(*e.children[0]);
        CallArgs args = eval_args(e, 1);
        return Value::boolean(apply_test(e.name, target, args) != e.negated);
      }
      case ExprKind::Neg:
      case ExprKind::Pos:
        return unary_op(e.kind == ExprKind::Neg, eval(*e.children[0]));
      case ExprKind::Not:
        return Value::boolean(!truthy(eval(*e.children[0])));
      case ExprKind::And: {
        Value l = eval(*e.children[0]);
        return truthy(l) ? eval(*e.children[1]) : l;
      }
      case ExprKind::Or: {
        Value l = eval(*e.children[0]);
        return truthy(l) ? l : eval(*e.children[1]);
      }
      case ExprKind::Binary: {
        Value l = eval(*e.children[0]);
        Value r = eval(*e.children[1]);
        return binary_op(e.name, l, r);
      }
      case ExprKind::Concat: {
        std::string out;
        for (const ExprPtr& c : e.children) {
          out += to_str(eval(*c));
          if (out.size() > limits_.max_output_bytes) break;  // Value::string reports it
        }
        return Value::string(std::move(out));
      }
      case ExprKind::Compare: {
        Value left = eval(*e.children[0]);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.children[k + 1]);
          if (!compare(e.ops[k], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::CondExpr:
        if (truthy(eval(*e.children[0]))) return eval(*e.children[1]);
        if (e.children[2]) return eval(*e.children[2]);
        return Value::undefined(
            "the inline if-expression evaluated to false and no else section was defined.");
    }
    throw RuntimeError("internal error: unknown expression");
  }

  const std::string& src_;
  const RenderLimits& limits_;
  std::vector<Scope> scopes_;
  std::string out_;
  uint64_t iterations_ = 0;
  Value block_value_;
};

}  // namespace

std::string render(const std::string& source, const Body& body, const Value& context,
                   const RenderLimits& limits) {
  ValueLimits vl;
  vl.max_string_bytes = limits.max_output_bytes;
  vl.max_depth = 2 * limits.max_depth;
  const ValueLimits saved = value_limits();
  set_value_limits(vl);
  reset_work();
  try {
    std::string out = Renderer(source, limits).run(body, context);
    set_value_limits(saved);
    release_namespaces();
    return out;
  } catch (...) {
    set_value_limits(saved);
    release_namespaces();
    throw;
  }
}

}  // namespace dsinfer::jinja
