// Recursive-descent parser of the Jinja subset (grammar as jinja2's parser; see parser.h): the
// token stream and the statements; expressions are parser_expr.cpp's.
#include "jinja/parser.h"

#include <algorithm>

#include "jinja/parser_internal.h"

namespace dsinfer::jinja {

namespace {

const char* const kUnsupportedTags[] = {
    "block", "endblock", "extends",    "include",       "import", "from",
    "macro", "endmacro", "call",       "endcall",       "filter", "endfilter",
    "with",  "endwith",  "autoescape", "endautoescape", "raw",    "endraw",
    "do",    "trans",    "endtrans",   "pluralize"};

const char* const kEndTags[] = {"endif", "endfor", "endset", "elif", "else", "endgeneration"};

}  // namespace

namespace detail {

// --- token stream ---

std::string Parser::describe(const Token& t) const {
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

// --- statements ---

// Parses until a block tag named in `end_tags` (left as the current token) or the end.
Body Parser::subparse(const std::vector<std::string>& end_tags) {
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
Body Parser::parse_body(const std::vector<std::string>& end_tags) {
  expect(Tok::BlockEnd, "'%}'");
  return subparse(end_tags);
}

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_if() {
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
void Parser::parse_targets(Stmt& s, bool allow_namespace, const char* end_name) {
  bool paren = skip_op("(");
  while (true) {
    const Token& t = cur();
    std::string name = expect_name();
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
        name == "None")
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_set() {
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

}  // namespace detail

Body parse_template(const std::string& source, int max_depth) {
  reset_work();
  return detail::Parser(source, max_depth).parse();
}

}  // namespace dsinfer::jinja
