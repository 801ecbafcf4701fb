// A JSON Schema validator for the tests of structured output: the keywords their schemas use
// (type, properties, required, additionalProperties, items, minItems, maxItems, enum, const,
// anyOf, $ref to #/$defs, minLength, maxLength, minimum, maximum, format date), written apart
// from the grammar engine so that a grammar that lets an invalid answer through fails the test.
#pragma once

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace dsinfer::test {

// Why `value` is not valid against `schema` ("" when it is); `root` resolves $ref.
inline std::string schema_violation(const nlohmann::json& value, const nlohmann::json& schema,
                                    const nlohmann::json& root, const std::string& at = "$") {
  using json = nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": schema false";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0) return at + ": unsupported $ref " + ref;
    return schema_violation(value, root["$defs"][ref.substr(prefix.size())], root, at);
  }
  if (schema.contains("anyOf")) {
    for (const json& option : schema["anyOf"])
      if (schema_violation(value, option, root, at).empty()) return "";
    return at + ": matches no anyOf option";
  }
  if (schema.contains("const") && value != schema["const"]) return at + ": not the const";
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found |= e == value;
    if (!found) return at + ": not in the enum";
  }
  if (schema.contains("type")) {
    const std::string type = schema["type"];
    const bool ok =
        (type == "object" && value.is_object()) || (type == "array" && value.is_array()) ||
        (type == "string" && value.is_string()) ||
        (type == "integer" && value.is_number_integer()) ||
        (type == "number" && value.is_number()) || (type == "boolean" && value.is_boolean()) ||
        (type == "null" && value.is_null());
    if (!ok) return at + ": not of type " + type + " (" + value.dump() + ")";
  }
  if (value.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array()))
      if (!value.contains(name.get<std::string>()))
        return at + ": lacks required " + name.get<std::string>();
    for (const auto& [key, v] : value.items()) {
      if (props.contains(key)) {
        std::string why = schema_violation(v, props[key], root, at + "." + key);
        if (!why.empty()) return why;
      } else if (schema.contains("additionalProperties") &&
                 schema["additionalProperties"] == false) {
        return at + ": has the property " + key + " the schema does not allow";
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      return at + ": fewer items than minItems";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return at + ": more items than maxItems";
    if (schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i) {
        std::string why =
            schema_violation(value[i], schema["items"], root, at + "[" + std::to_string(i) + "]");
        if (!why.empty()) return why;
      }
  }
  if (value.is_string()) {
    // lengths in code points, as JSON Schema counts them
    const std::string s = value.get<std::string>();
    size_t points = 0;
    for (unsigned char c : s) points += (c & 0xC0) != 0x80;
    if (schema.contains("minLength") && points < schema["minLength"].get<size_t>())
      return at + ": shorter than minLength";
    if (schema.contains("maxLength") && points > schema["maxLength"].get<size_t>())
      return at + ": longer than maxLength";
    if (schema.value("format", "") == "date" &&
        !std::regex_match(s, std::regex(R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))")))
      return at + ": not a date: " + s;
  }
  if (value.is_number()) {
    const double x = value.get<double>();
    if (schema.contains("minimum") && x < schema["minimum"].get<double>())
      return at + ": below minimum";
    if (schema.contains("maximum") && x > schema["maximum"].get<double>())
      return at + ": above maximum";
  }
  return "";
}

}  // namespace dsinfer::test
