#include "grammar/json_schema_support.h"

#include <set>
#include <string>

#include "core/error.h"

namespace dsinfer {

namespace {

// The keywords xgrammar's JSON Schema converter reads (cpp/json_schema_converter.cc), and the
// annotations that constrain nothing.
const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> keywords = {
      // structure
      "type", "properties", "required", "additionalProperties", "patternProperties",
      "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties", "items",
      "prefixItems", "minItems", "maxItems", "unevaluatedItems", "enum", "const", "anyOf", "oneOf",
      "allOf", "$ref", "$defs", "definitions",
      // strings and numbers
      "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf",
      // annotations
      "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
      "$comment", "$schema", "$id", "nullable", "strict"};
  return keywords;
}

const std::set<std::string>& supported_formats() {
  static const std::set<std::string> formats = {"date",          "time",
                                                "date-time",     "duration",
                                                "email",         "hostname",
                                                "ipv4",          "ipv6",
                                                "uuid",          "uri",
                                                "uri-reference", "uri-template",
                                                "json-pointer",  "relative-json-pointer"};
  return formats;
}

// Keywords whose value is a map of names to schemas, a schema, or a list of schemas.
const std::set<std::string> kSchemaMaps = {"properties", "patternProperties", "$defs",
                                           "definitions"};
const std::set<std::string> kSchemas = {"additionalProperties", "propertyNames",
                                        "unevaluatedProperties", "items", "unevaluatedItems"};
const std::set<std::string> kSchemaLists = {"prefixItems", "anyOf", "oneOf", "allOf"};

// A JSON pointer's token (RFC 6901: ~ and / escaped).
std::string pointer_token(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

void check_node(const nlohmann::json& schema, const std::string& at, int depth) {
  check(depth <= 64, "the JSON Schema nests deeper than 64 levels (at #", at, ")");
  if (schema.is_boolean()) return;
  check(schema.is_object(), "the JSON Schema at #", at, " is not an object or a boolean");
  for (const auto& [key, value] : schema.items()) {
    check(supported_keywords().count(key) != 0, "the JSON Schema keyword \"", key, "\" (at #", at,
          ") is not supported by structured output");
    const std::string here = at + "/" + pointer_token(key);
    if (key == "format") {
      check(value.is_string(), "the JSON Schema's format at #", at, " is not a string");
      check(supported_formats().count(value.get<std::string>()) != 0, "the JSON Schema format \"",
            value.get<std::string>(), "\" (at #", at, ") is not supported by structured output");
    } else if (kSchemaMaps.count(key)) {
      check(value.is_object(), "the JSON Schema's ", key, " at #", at, " is not an object");
      for (const auto& [name, sub] : value.items())
        check_node(sub, here + "/" + pointer_token(name), depth + 1);
    } else if (kSchemas.count(key)) {
      if (value.is_array() && key == "items") {  // draft 4's tuple form
        for (size_t i = 0; i < value.size(); ++i)
          check_node(value[i], here + "/" + std::to_string(i), depth + 1);
      } else {
        check_node(value, here, depth + 1);
      }
    } else if (kSchemaLists.count(key)) {
      check(value.is_array(), "the JSON Schema's ", key, " at #", at, " is not an array");
      for (size_t i = 0; i < value.size(); ++i)
        check_node(value[i], here + "/" + std::to_string(i), depth + 1);
    }
  }
}

}  // namespace

void check_schema_support(const nlohmann::json& schema) { check_node(schema, "", 0); }

}  // namespace dsinfer
