// Lexer of the Jinja subset: splits a template into text and tag tokens exactly as jinja2's lexer
// does with trim_blocks=True and lstrip_blocks=True (transformers' settings), including the
// whitespace control markers {%- -%} {{- -}} {#- -#} and {%+ +%}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsinfer::jinja {

enum class Tok : uint8_t {
  Data,        // template text (already stripped as whitespace control says)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text = the decoded literal
  Int,
  Float,
  Op,  // text = the operator: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { } ;
  Eof,
};

struct Token {
  Tok type = Tok::Eof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  size_t pos = 0;  // byte offset in the normalised source
};

// jinja2 first turns \r\n and \r into \n and drops one trailing newline (keep_trailing_newline is
// off); positions refer to the result.
std::string normalize_source(const std::string& source);

// Tokens of a normalised source; throws dsinfer::Error naming the position on a lexical error.
std::vector<Token> tokenize(const std::string& source);

// "line:column" (1-based, columns in characters) of a byte offset.
std::string position_of(const std::string& source, size_t pos);

// Throws dsinfer::Error("chat template: <where>: <message>").
[[noreturn]] void fail_at(const std::string& source, size_t pos, const std::string& message);

}  // namespace dsinfer::jinja
