// json_source_at (core/json_source.h): the text of a value inside a JSON document as written (key
// order, spacing), found by a path of keys past strings holding brackets, quotes and escapes;
// the last of duplicate keys, as nlohmann's parse; nothing for a missing path; deep nesting safe.
#include "core/json_source.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace dsinfer::json_source_test {
namespace {

TEST(JsonSource, FindsTheValueAsWritten) {
  const std::string doc =
      R"({"a": "x}{\"]", "rf": {"type": "json_schema", "json_schema": {"name": "n",
          "schema": {"z": 1, "a": [1, {"q": "}"}], "m": null} }}, "b": true})";
  EXPECT_EQ(json_source_at(doc, {"rf", "json_schema", "schema"}).value(),
            R"({"z": 1, "a": [1, {"q": "}"}], "m": null})");
  EXPECT_EQ(json_source_at(doc, {"a"}).value(), R"("x}{\"]")");
  EXPECT_EQ(json_source_at(doc, {"b"}).value(), "true");
  EXPECT_EQ(json_source_at(doc, {"rf", "json_schema", "name"}).value(), "\"n\"");
  EXPECT_FALSE(json_source_at(doc, {"rf", "missing"}).has_value());
  EXPECT_FALSE(json_source_at(doc, {"a", "inside a string"}).has_value());
  EXPECT_FALSE(json_source_at("[1, 2]", {"a"}).has_value());
}

TEST(JsonSource, TheLastDuplicateAndEscapedKeysCountAsNlohmannReadsThem) {
  const std::string doc = R"({"k": 1, "\u006b": {"x": 2}, "other": 3})";
  const nlohmann::json parsed = nlohmann::json::parse(doc);
  EXPECT_EQ(json_source_at(doc, {"k"}).value(), R"({"x": 2})");
  EXPECT_EQ(nlohmann::json::parse(json_source_at(doc, {"k"}).value()), parsed["k"]);
}

TEST(JsonSource, DeepNestingIsScannedWithoutRecursion) {
  const int depth = 200000;
  const std::string doc =
      "{\"deep\": " + std::string(depth, '[') + std::string(depth, ']') + ", \"after\": 5}";
  EXPECT_EQ(json_source_at(doc, {"after"}).value(), "5");
  EXPECT_EQ(json_source_at(doc, {"deep"}).value().size(), 2u * depth);
}

}  // namespace
}  // namespace dsinfer::json_source_test
