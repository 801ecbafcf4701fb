// Syntax tree and parser of the Jinja subset. The grammar and operator precedence follow jinja2's
// parser: conditional expression < or < and < not < comparisons/in < + - < ~ < * / // % < ** <
// unary - + < filters and tests < postfix (attribute, item, slice, call) < primary.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace dsinfer::jinja {

enum class ExprKind : uint8_t {
  Const,    // value
  Name,     // name
  List,     // children = items
  Tuple,    // children = items
  Dict,     // children = key, value, key, value, ...
  GetAttr,  // children[0] . name
  GetItem,  // children[0] [ children[1] ]
  Slice,    // children[0] [ children[1] : children[2] : children[3] ] (null = omitted)
  Call,     // children[0] ( children[1..], kwargs )
  Filter,   // children[0] | name ( children[1..], kwargs ); children[0] null in {% set x | f %}
  Test,     // children[0] is [not] name ( children[1..], kwargs )
  Neg,      // - children[0]
  Pos,      // + children[0]
  Not,      // not children[0]
  And,      // children[0] and children[1]
  Or,       // children[0] or children[1]
  Binary,   // children[0] name children[1], name one of + - * / // % **
  Concat,   // children joined with ~
  Compare,  // children[0] ops[0] children[1] ops[1] children[2] ... (ops: == != < <= > >= in notin)
  CondExpr,    // children[1] if children[0] else children[2] (children[2] null when omitted)
  BlockValue,  // the rendered body of a {% set x | filter %}...{% endset %} block
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Const;
  size_t pos = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind : uint8_t {
  Text,      // text
  Print,     // {{ exprs[0] }} or {% print exprs... %}
  If,        // exprs = conditions; bodies[k] for exprs[k], bodies.back() = else when size > exprs
  For,       // targets in exprs[0] [if exprs[1]]; bodies[0] = body, bodies[1] = else
  Set,       // targets (or ns_name.ns_attr) = exprs[0]
  SetBlock,  // targets = rendered bodies[0], through exprs[0] (a Filter chain) when present
  Break,
  Continue,
  Scope,  // bodies[0] rendered in place ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::Text;
  size_t pos = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // names; several = tuple unpacking
  bool unpack = false;               // the target was written as a tuple
  std::string ns_name, ns_attr;      // {% set ns.attr = ... %}
};

// Parses a normalised source (see normalize_source). max_depth bounds nesting of expressions and
// blocks. Throws dsinfer::Error naming the position and construct on unsupported or bad syntax.
Body parse_template(const std::string& source, int max_depth);

// Names the interpreter knows (the parser rejects others up front, as jinja2 does).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace dsinfer::jinja
