// The request fields that ask for structured output (README "Structured output"), as an
// OutputGrammar (engine/sampling.h):
// - response_format (OpenAI): {"type": "text"}, {"type": "json_object"} (llama.cpp's optional
//   "schema" beside it), {"type": "json_schema", "json_schema": {"name", "schema", "strict"}};
// - grammar (llama.cpp's server): a GBNF grammar, root rule "root";
// - json_schema (llama.cpp's server): a JSON Schema;
// - guided_json, guided_regex, guided_grammar (vLLM's extra parameters).
// At most one of them; shapes are checked here (a 400 naming the field), the grammar itself when
// the server compiles it (grammar/grammar_engine.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/tool_prompt.h"
#include "engine/sampling.h"

namespace dsinfer {

struct RequestedGrammar {
  OutputGrammar grammar;  // kind kNone: none asked for
  std::string param;      // the field it came from (an error about it names this)
};

RequestedGrammar parse_output_grammar(const nlohmann::json& body);

// A chat request's tool_choice, enforced: "required" (at least one call of any tool; one only
// with parallel_tool_calls false) or {"type": "function", "function": {"name"}} (that tool, once)
// as a grammar over the template's tool-call `format`: the whole answer is the tool-call section,
// each call's arguments valid against its tool's parameters. Kind kNone for "auto", "none" or no
// tool_choice. A 400 for a name not among `tools`, tools without a usable format, or a
// tool_choice of another shape.
RequestedGrammar tool_choice_grammar(const nlohmann::json& body, const nlohmann::json& tools,
                                     const std::optional<ToolCallFormat>& format);

// A JSON Schema's text as the client wrote it, taken from the body's text (`body_text`, already
// parsed as `grammar`'s request): nlohmann::json sorts an object's keys, and a constrained answer
// writes the properties in the order of the schema's text, which is the client's to choose (a
// "reasoning" field before an "answer", say).
void keep_schema_order(const std::string& body_text, const std::string& param,
                       OutputGrammar& grammar);

}  // namespace dsinfer
