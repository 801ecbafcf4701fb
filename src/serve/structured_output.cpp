#include "serve/structured_output.h"

#include "core/json_source.h"
#include "serve/request.h"

namespace dsinfer {

using json = nlohmann::json;

namespace {

// A schema given as a JSON object or boolean; anything else is a 400 naming `param`.
OutputGrammar schema_grammar(const json& schema, bool strict, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean())
    reject(param + " must be a JSON Schema (an object)", param);
  return {OutputGrammar::Kind::kJsonSchema, schema.dump(), strict};
}

std::string text_field(const json& body, const char* name, const char* what) {
  const json& v = body[name];
  if (!v.is_string() || v.get<std::string>().empty())
    reject(std::string(name) + " must be " + what + " (a non-empty string)", name);
  return v.get<std::string>();
}

RequestedGrammar response_format(const json& format) {
  const std::string param = "response_format";
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    reject("response_format must be an object with a type: text, json_object or json_schema",
           param);
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") {
    const json schema = format.value("schema", json());  // llama.cpp's extension
    if (!schema.is_null())
      return {schema_grammar(schema, false, param + ".schema"), param + ".schema"};
    return {{OutputGrammar::Kind::kJsonObject, "", false}, param};
  }
  if (type == "json_schema") {
    const json spec = format.value("json_schema", json());
    if (!spec.is_object() || !spec.contains("schema"))
      reject("response_format json_schema needs json_schema: {name, schema, strict}",
             param + ".json_schema");
    const json strict = spec.value("strict", json());
    if (!strict.is_null() && !strict.is_boolean())
      reject("response_format.json_schema.strict must be a boolean", param + ".json_schema.strict");
    return {schema_grammar(spec["schema"], strict.is_boolean() && strict.get<bool>(),
                           param + ".json_schema.schema"),
            param + ".json_schema.schema"};
  }
  reject("response_format type \"" + type.substr(0, 40) +
             "\" is not supported (text, json_object or json_schema)",
         param + ".type");
}

}  // namespace

RequestedGrammar parse_output_grammar(const json& body) {
  RequestedGrammar out;
  int given = 0;
  auto present = [&](const char* name) {
    const bool yes = body.contains(name) && !body[name].is_null();
    given += yes;
    return yes;
  };
  // a grammar text field: kGbnf or kRegex
  auto text_grammar = [&](const char* name, OutputGrammar::Kind kind, const char* what) {
    out.grammar.kind = kind;
    out.grammar.text = text_field(body, name, what);
    out.param = name;
  };
  if (present("response_format")) out = response_format(body["response_format"]);
  if (present("json_schema")) {
    out.grammar = schema_grammar(body["json_schema"], false, "json_schema");
    out.param = "json_schema";
  }
  if (present("guided_json")) {
    const json& g = body["guided_json"];
    json schema = g;
    if (g.is_string()) {
      // parsed as a body is (depth-limited: dumping a 200k-deep value recurses as deep)
      try {
        schema = parse_body(g.get<std::string>());
      } catch (const ApiError& e) {
        reject("guided_json: " + e.message, "guided_json");
      }
    }
    out.grammar = schema_grammar(schema, false, "guided_json");
    out.param = "guided_json";
  }
  if (present("grammar")) text_grammar("grammar", OutputGrammar::Kind::kGbnf, "a GBNF grammar");
  if (present("guided_grammar"))
    text_grammar("guided_grammar", OutputGrammar::Kind::kGbnf, "a GBNF grammar");
  if (present("guided_regex"))
    text_grammar("guided_regex", OutputGrammar::Kind::kRegex, "a regular expression");
  if (given > 1)
    reject(
        "give at most one of response_format, json_schema, grammar, guided_json, guided_regex "
        "and guided_grammar",
        out.param);
  return out;
}

namespace {

// One tool's call as a structural tag's tag: begin .. NAME .. arguments .. end.
json call_tag(const json& tool, const ToolCallFormat& f) {
  const json& fn = tool["function"];
  json schema = fn.value("parameters", json());
  if (schema.is_null()) schema = json{{"type", "object"}};
  return {
      {"type", "tag"},
      {"begin", f.call_begin + fn["name"].get<std::string>() + f.name_to_arguments},
      // at most one space where JSON allows whitespace: a model cannot pad a call forever
      {"content", {{"type", "json_schema"}, {"json_schema", schema}, {"max_whitespace_cnt", 1}}},
      {"end", f.call_end}};
}

}  // namespace

RequestedGrammar tool_choice_grammar(const json& body, const json& tools,
                                     const std::optional<ToolCallFormat>& format) {
  const json choice = body.value("tool_choice", json());
  if (choice.is_null() || choice == "auto" || choice == "none") return {};
  const bool required = choice == "required";
  const bool named = choice.is_object() && choice.value("type", json()) == "function" &&
                     choice.contains("function") && choice["function"].is_object() &&
                     choice["function"].value("name", json()).is_string();
  if (!required && !named)
    reject(
        "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  if (!tools.is_array() || tools.empty()) reject("tool_choice needs tools", "tool_choice");
  if (!format)
    reject("this model's chat template writes no tool calls, so tool_choice cannot be enforced",
           "tool_choice");
  const bool parallel = field<bool>(body, "parallel_tool_calls", true, "a boolean");
  json tags = json::array();
  for (const json& tool : tools) {
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].value("name", json()).is_string())
      reject("each tool must be {\"type\": \"function\", \"function\": {\"name\", ...}}", "tools");
    if (named && tool["function"]["name"] != choice["function"]["name"]) continue;
    tags.push_back(call_tag(tool, *format));
  }
  if (tags.empty())
    reject("tool_choice names the function \"" +
               choice["function"]["name"].get<std::string>().substr(0, 64) +
               "\", which is not among the tools",
           "tool_choice");
  const json calls = {{"type", "tags_with_separator"},
                      {"tags", tags},
                      {"separator", format->separator},
                      {"at_least_one", true},
                      {"stop_after_first", named || !parallel}};
  const json tag = {{"type", "structural_tag"},
                    {"format",
                     {{"type", "sequence"},
                      {"elements",
                       {{{"type", "const_string"}, {"value", format->calls_begin}},
                        calls,
                        {{"type", "const_string"}, {"value", format->calls_end}}}}}}};
  RequestedGrammar out;
  out.grammar = {OutputGrammar::Kind::kStructuralTag, tag.dump(), true};
  out.param = "tool_choice";
  return out;
}

void keep_schema_order(const std::string& body_text, const std::string& param,
                       OutputGrammar& grammar) {
  if (grammar.kind != OutputGrammar::Kind::kJsonSchema) return;
  std::vector<std::string> path;
  for (size_t start = 0;;) {
    const size_t dot = param.find('.', start);
    path.push_back(param.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::optional<std::string_view> source = json_source_at(body_text, path);
  if (!source || source->empty()) return;
  if (source->front() == '{') {
    grammar.text = std::string(*source);
  } else if (source->front() == '"') {  // guided_json given as a string: the schema's own text
    const json text = json::parse(*source, nullptr, false);
    if (text.is_string()) grammar.text = text.get<std::string>();
  }
}

}  // namespace dsinfer
