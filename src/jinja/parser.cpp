// Recursive-descent parser of the Jinja subset (grammar as jinja2's parser; see parser.h).
#include "jinja/parser.h"

#include <algorithm>

namespace dsinfer::jinja {

namespace {

const char* const kUnsupportedTags[] = {
    "block", "endblock", "extends",    "include",       "import", "from",
    "macro", "endmacro", "call",       "endcall",       "filter", "endfilter",
    "with",  "endwith",  "autoescape", "endautoescape", "raw",    "endraw",
    "do",    "trans",    "endtrans",   "pluralize"};

const char* const kEndTags[] = {"endif", "endfor", "endset", "elif", "else", "endgeneration"};

class Parser {
 public:
  Parser(const std::string& src, int max_depth)
      : src_(src), tokens_(tokenize(src)), max_depth_(max_depth) {}

  Body parse() {
    Body body = subparse({});
    return body;
  }

 private:
  // --- token stream ---
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Data:
        return "template text";
      case Tok::VarBegin:
        return "'{{'";
      case Tok::VarEnd:
        return "end of print statement '}}'";
      case Tok::BlockBegin:
        return "'{%'";
      case Tok::BlockEnd:
        return "end of statement block '%}'";
      case Tok::Name:
        return "'" + t.text + "'";
      case Tok::String:
        return "string literal";
      case Tok::Int:
      case Tok::Float:
        return "number '" + t.text + "'";
      case Tok::Op:
        return "'" + t.text + "'";
      case Tok::Eof:
        return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    fail_at(src_, t.pos, message);
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type)
      fail(cur(), std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail(cur(), "expected a name, got " + describe(cur()));
    return next().text;
  }

  struct DepthGuard {
    DepthGuard(Parser& p, const Token& t) : p_(p) {
      if (++p_.depth_ > p_.max_depth_)
        p_.fail(t, "template nested deeper than " + std::to_string(p_.max_depth_) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // Left-deep chains (a + b + c ..., x.a.b ..., x|f|g ...) nest one tree level per link: each
  // link counts towards the depth limit until the chain's parse function returns.
  struct ChainGuard {
    explicit ChainGuard(Parser& p) : p_(p) {}
    void bump(const Token& t) {
      ++added_;
      if (++p_.depth_ > p_.max_depth_)
        p_.fail(t, "template nested deeper than " + std::to_string(p_.max_depth_) + " levels");
    }
    ~ChainGuard() { p_.depth_ -= added_; }
    Parser& p_;
    int added_ = 0;
  };

  static ExprPtr make(ExprKind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // --- statements ---

  // Parses until a block tag named in `end_tags` (left as the current token) or the end.
  Body subparse(const std::vector<std::string>& end_tags) {
    Body body;
    while (cur().type != Tok::Eof) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Print;
        s->pos = t.pos;
        s->exprs.push_back(parse_tuple(true, {}, false));
        expect(Tok::VarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name &&
            std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end())
          return body;
        body.push_back(parse_statement());
        expect(Tok::BlockEnd, "'%}'");
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
    if (!end_tags.empty()) {
      std::string want;
      for (const auto& e : end_tags) want += (want.empty() ? "'" : " or '") + e + "'";
      fail(cur(), "unexpected end of template, expected " + want);
    }
    return body;
  }

  // After a tag's header: "%}" then the body up to one of end_tags.
  Body parse_body(const std::vector<std::string>& end_tags) {
    expect(Tok::BlockEnd, "'%}'");
    return subparse(end_tags);
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    DepthGuard guard(*this, t);
    if (t.type != Tok::Name) fail(t, "tag name expected, got " + describe(t));
    const std::string& name = t.text;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "print") {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Print;
      s->pos = next().pos;
      while (cur().type != Tok::BlockEnd) {
        if (!s->exprs.empty()) expect_op(",");
        s->exprs.push_back(parse_expression(true));
      }
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(t, "'" + name + "' outside of a for loop");
      auto s = std::make_unique<Stmt>();
      s->kind = name == "break" ? StmtKind::Break : StmtKind::Continue;
      s->pos = next().pos;
      return s;
    }
    if (name == "generation") {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Scope;
      s->pos = next().pos;
      s->bodies.push_back(parse_body({"endgeneration"}));
      next();
      return s;
    }
    for (const char* u : kUnsupportedTags)
      if (name == u) fail(t, "unsupported tag '" + name + "'");
    for (const char* e : kEndTags)
      if (name == e) fail(t, "unexpected '" + name + "' (no open block it could end)");
    fail(t, "unknown tag '" + name + "'");
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::If;
    s->pos = next().pos;  // 'if'
    while (true) {
      s->exprs.push_back(parse_tuple(false, {}, false));
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      const std::string tag = next().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        s->bodies.push_back(parse_body({"endif"}));
        next();
      }
      break;
    }
    return s;
  }

  // Assignment targets: a name, a tuple of names, or (for set) namespace.attr.
  void parse_targets(Stmt& s, bool allow_namespace, const char* end_name) {
    bool paren = skip_op("(");
    while (true) {
      const Token& t = cur();
      std::string name = expect_name();
      if (name == "true" || name == "false" || name == "none" || name == "True" ||
          name == "False" || name == "None")
        fail(t, "cannot assign to '" + name + "'");
      if (allow_namespace && !paren && s.targets.empty() && is_op(".")) {
        next();
        s.ns_name = name;
        s.ns_attr = expect_name();
        return;
      }
      s.targets.push_back(name);
      if (!skip_op(",")) break;
      s.unpack = true;
      if ((paren && is_op(")")) || (end_name && is_name(end_name)) || is_op("=") || is_op("|") ||
          cur().type == Tok::BlockEnd)
        break;  // trailing comma
    }
    if (paren) {
      expect_op(")");
      s.unpack = true;
    }
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::For;
    s->pos = next().pos;  // 'for'
    parse_targets(*s, false, "in");
    if (!skip_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
    s->exprs.push_back(parse_tuple(false, {"recursive"}, false));
    if (skip_name("if")) {
      s->exprs.push_back(parse_expression(true));
    } else {
      s->exprs.push_back(nullptr);
    }
    if (is_name("recursive")) fail(cur(), "unsupported recursive for loop");
    ++loop_depth_;
    s->bodies.push_back(parse_body({"endfor", "else"}));
    --loop_depth_;
    if (next().text == "else") {
      s->bodies.push_back(parse_body({"endfor"}));
      next();
    }
    return s;
  }

  StmtPtr parse_set() {
    auto s = std::make_unique<Stmt>();
    s->pos = next().pos;  // 'set'
    parse_targets(*s, true, nullptr);
    if (skip_op("=")) {
      s->kind = StmtKind::Set;
      s->exprs.push_back(parse_tuple(true, {}, false));
      return s;
    }
    s->kind = StmtKind::SetBlock;
    if (!s->ns_name.empty()) fail(cur(), "a {% set %} block cannot assign a namespace attribute");
    if (is_op("|")) {
      s->exprs.push_back(parse_filters(make(ExprKind::BlockValue, cur().pos)));
    }
    s->bodies.push_back(parse_body({"endset"}));
    next();
    return s;
  }

  // --- expressions ---

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    for (const auto& e : extra_end)
      if (cur().type == Tok::Name && cur().text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end,
                      bool explicit_parens) {
    const size_t start = cur().pos;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail(cur(), "expected an expression, got " + describe(cur()));
    }
    auto e = make(ExprKind::Tuple, start);
    e->children = std::move(args);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this, cur());
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    ChainGuard chain(*this);
    while (is_name("if")) {
      chain.bump(cur());
      const size_t pos = next().pos;
      auto e = make(ExprKind::CondExpr, pos);
      e->children.push_back(parse_or());
      e->children.push_back(std::move(expr));
      e->children.push_back(skip_name("else") ? parse_expression(true) : nullptr);
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, size_t pos, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = make(kind, pos);
    e->name = std::move(op);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainGuard chain(*this);
    while (is_name("or")) {
      chain.bump(cur());
      size_t pos = next().pos;
      left = binary(ExprKind::Or, pos, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainGuard chain(*this);
    while (is_name("and")) {
      chain.bump(cur());
      size_t pos = next().pos;
      left = binary(ExprKind::And, pos, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, cur());
      auto e = make(ExprKind::Not, next().pos);
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      size_t pos = cur().pos;
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::Compare, pos);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    ChainGuard chain(*this);
    while (is_op("+") || is_op("-")) {
      chain.bump(cur());
      const Token& t = next();
      left = binary(ExprKind::Binary, t.pos, std::move(left), parse_concat(), t.text);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make(ExprKind::Concat, cur().pos);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    ChainGuard chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.bump(cur());
      const Token& t = next();
      left = binary(ExprKind::Binary, t.pos, std::move(left), parse_pow(), t.text);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    ChainGuard chain(*this);
    while (is_op("**")) {
      chain.bump(cur());
      const Token& t = next();
      left = binary(ExprKind::Binary, t.pos, std::move(left), parse_unary(true), t.text);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, cur());
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(t.text == "-" ? ExprKind::Neg : ExprKind::Pos, t.pos);
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::Name: {
        next();
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto e = make(ExprKind::Const, t.pos);
          e->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          auto e = make(ExprKind::Const, t.pos);
          e->value = Value::none();
          return e;
        }
        auto e = make(ExprKind::Name, t.pos);
        e->name = t.text;
        return e;
      }
      case Tok::String: {
        auto e = make(ExprKind::Const, t.pos);
        std::string s;
        while (cur().type == Tok::String) s += next().text;
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int: {
        auto e = make(ExprKind::Const, t.pos);
        e->value = Value::integer(t.int_value);
        next();
        return e;
      }
      case Tok::Float: {
        auto e = make(ExprKind::Const, t.pos);
        e->value = Value::number(t.float_value);
        next();
        return e;
      }
      case Tok::Op:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto e = make(ExprKind::List, next().pos);
          while (!is_op("]")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("]")) break;
            e->children.push_back(parse_expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = make(ExprKind::Dict, next().pos);
          while (!is_op("}")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("}")) break;
            e->children.push_back(parse_expression(true));
            expect_op(":");
            e->children.push_back(parse_expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail(t, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (is_op(".") || is_op("[") || is_op("(")) chain.bump(cur());
      if (is_op(".")) {
        const size_t pos = next().pos;
        if (cur().type == Tok::Name) {
          auto e = make(ExprKind::GetAttr, pos);
          e->name = next().text;
          e->children.push_back(std::move(node));
          node = std::move(e);
        } else if (cur().type == Tok::Int) {
          auto e = make(ExprKind::GetItem, pos);
          e->children.push_back(std::move(node));
          auto k = make(ExprKind::Const, cur().pos);
          k->value = Value::integer(next().int_value);
          e->children.push_back(std::move(k));
          node = std::move(e);
        } else {
          fail(cur(), "expected a name or number after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const size_t pos = next().pos;  // '['
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed(pos));
    }
    expect_op("]");
    if (args.empty()) fail_at(src_, pos, "empty subscript '[]'");
    if (args.size() == 1 && args[0]->kind == ExprKind::Slice) {
      args[0]->children[0] = std::move(node);
      return std::move(args[0]);
    }
    for (const auto& a : args)
      if (a->kind == ExprKind::Slice) fail_at(src_, a->pos, "unsupported multi-dimensional slice");
    auto e = make(ExprKind::GetItem, pos);
    e->children.push_back(std::move(node));
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      auto t = make(ExprKind::Tuple, pos);
      t->children = std::move(args);
      e->children.push_back(std::move(t));
    }
    return e;
  }

  // One subscript: an expression or a slice start:stop:step (children[0] is left empty for the
  // caller to fill with the sliced object).
  ExprPtr parse_subscribed(size_t pos) {
    ExprPtr start;
    if (!is_op(":")) {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      start = std::move(e);
    }
    next();  // ':'
    auto slice = make(ExprKind::Slice, pos);
    slice->children.push_back(nullptr);
    slice->children.push_back(std::move(start));
    if (is_op(":") || is_op("]") || is_op(",")) {
      slice->children.push_back(nullptr);
    } else {
      slice->children.push_back(parse_expression(true));
    }
    if (skip_op(":")) {
      if (is_op("]") || is_op(",")) {
        slice->children.push_back(nullptr);
      } else {
        slice->children.push_back(parse_expression(true));
      }
    } else {
      slice->children.push_back(nullptr);
    }
    return slice;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**"))
        fail(cur(), "unsupported '" + cur().text + "' argument unpacking");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail(cur(), "positional argument after keyword argument");
        e.children.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::Call, cur().pos);
    e->children.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (is_op("|") || is_name("is") || is_op("(")) chain.bump(cur());
      if (is_op("|")) {
        node = parse_filters(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // One or more "| name(args)" applied to node.
  ExprPtr parse_filters(ExprPtr node) {
    ChainGuard chain(*this);
    while (skip_op("|")) {
      chain.bump(cur());
      const Token& t = cur();
      std::string name = expect_name();
      if (is_op(".")) fail(t, "unsupported filter '" + name + ".'");
      if (!is_known_filter(name)) fail(t, "unsupported filter '" + name + "'");
      auto e = make(ExprKind::Filter, t.pos);
      e->name = name;
      e->children.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto e = make(ExprKind::Test, next().pos);  // 'is'
    e->negated = skip_name("not");
    const Token& t = cur();
    e->name = expect_name();
    if (is_op(".")) fail(t, "unsupported test '" + e->name + ".'");
    if (!is_known_test(e->name)) fail(t, "unsupported test '" + e->name + "'");
    e->children.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(cur(), "tests cannot be chained with 'is'");
      e->children.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source, int max_depth) {
  reset_work();
  return Parser(source, max_depth).parse();
}

}  // namespace dsinfer::jinja
