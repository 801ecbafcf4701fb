// The expressions of the Jinja subset's recursive-descent parser, from the conditional expression
// down to primaries, with jinja2's precedence (see parser.h).
#include <string>
#include <vector>

#include "jinja/parser_internal.h"

namespace dsinfer::jinja::detail {

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
  for (const auto& e : extra_end)
    if (cur().type == Tok::Name && cur().text == e) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end,
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

ExprPtr Parser::parse_expression(bool with_condexpr) {
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

ExprPtr Parser::binary(ExprKind kind, size_t pos, ExprPtr a, ExprPtr b, std::string op) {
  auto e = make(kind, pos);
  e->name = std::move(op);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  ChainGuard chain(*this);
  while (is_name("or")) {
    chain.bump(cur());
    size_t pos = next().pos;
    left = binary(ExprKind::Or, pos, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  ChainGuard chain(*this);
  while (is_name("and")) {
    chain.bump(cur());
    size_t pos = next().pos;
    left = binary(ExprKind::And, pos, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this, cur());
    auto e = make(ExprKind::Not, next().pos);
    e->children.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    size_t pos = cur().pos;
    if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
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

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  ChainGuard chain(*this);
  while (is_op("+") || is_op("-")) {
    chain.bump(cur());
    const Token& t = next();
    left = binary(ExprKind::Binary, t.pos, std::move(left), parse_concat(), t.text);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = make(ExprKind::Concat, cur().pos);
  e->children.push_back(std::move(first));
  while (skip_op("~")) e->children.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  ChainGuard chain(*this);
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    chain.bump(cur());
    const Token& t = next();
    left = binary(ExprKind::Binary, t.pos, std::move(left), parse_pow(), t.text);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  ChainGuard chain(*this);
  while (is_op("**")) {
    chain.bump(cur());
    const Token& t = next();
    left = binary(ExprKind::Binary, t.pos, std::move(left), parse_unary(true), t.text);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::parse_primary() {
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

ExprPtr Parser::parse_postfix(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr node) {
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
ExprPtr Parser::parse_subscribed(size_t pos) {
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

void Parser::parse_call_args(Expr& e) {
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

ExprPtr Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::Call, cur().pos);
  e->children.push_back(std::move(node));
  parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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
ExprPtr Parser::parse_filters(ExprPtr node) {
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

ExprPtr Parser::parse_test(ExprPtr node) {
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

}  // namespace dsinfer::jinja::detail
