// The parser of the Jinja subset (parser.h) as its two files share it: parser.cpp (the token
// stream, statements), parser_expr.cpp (expressions). Internal to src/jinja.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "jinja/parser.h"

namespace dsinfer::jinja::detail {

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

  std::string describe(const Token& t) const;

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

  // --- statements (parser.cpp) ---

  Body subparse(const std::vector<std::string>& end_tags);
  Body parse_body(const std::vector<std::string>& end_tags);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  void parse_targets(Stmt& s, bool allow_namespace, const char* end_name);
  StmtPtr parse_for();
  StmtPtr parse_set();

  // --- expressions (parser_expr.cpp) ---

  bool is_tuple_end(const std::vector<std::string>& extra_end) const;
  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end,
                      bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr binary(ExprKind kind, size_t pos, ExprPtr a, ExprPtr b, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed(size_t pos);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filters(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);

  const std::string& src_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace dsinfer::jinja::detail
