// The Vercel AI SDK (@ai-sdk/openai-compatible) and LangChain.js (@langchain/openai), pinned in
// tests/openai_client/package.json and installed by scripts/test.sh, against `dsinfer serve`
// (tests/openai_client/clients_check.mjs): generateText, streamText, invoke and stream read the
// reference's greedy answer; generateObject, generateText with Output.object and
// withStructuredOutput (by JSON Schema, and by function calling: a forced tool call) return objects
// valid against their zod schema. Skipped when node or the packages are missing.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "json_schema_validator.h"
#include "story_server.h"
#include "test_support.h"

namespace dsinfer::serve_clients_test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(ServeClients, TheAiSdkAndLangChainReadAnswersAndObjects) {
  const fs::path npm = fs::path(DSINFER_BIN).parent_path() / "npm";
  for (const char* package : {"ai", "@ai-sdk/openai-compatible", "@langchain/openai", "zod"})
    if (!fs::exists(npm / "node_modules" / package))
      GTEST_SKIP() << package << " is not installed in " << npm << " (scripts/test.sh does it)";
  if (!fs::exists(npm / "clients_check.mjs")) GTEST_SKIP() << "clients_check.mjs not in " << npm;
  if (std::system("command -v node > /dev/null") != 0) GTEST_SKIP() << "node not installed";
  const auto [prompt, completion] = test::golden_story_chat();
  test::StoryServer server;
  auto r = test::run_command("cd " + npm.string() + " && PORT=" + std::to_string(server.port()) +
                             " MODEL=story PROMPT='" + prompt +
                             "' AI_SDK_LOG_WARNINGS=false timeout 180 node clients_check.mjs");
  server.terminate();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json seen = json::parse(r.out);
  for (const char* text : {"ai_generateText", "ai_streamText", "lc_invoke", "lc_stream"})
    EXPECT_EQ(seen[text], completion) << text << ": " << seen[text].dump();
  const json person = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "color": {"enum": ["red", "green", "blue"]}},
    "required": ["name", "age", "color"], "additionalProperties": false})");
  for (const char* object : {"ai_generateObject", "ai_outputObject", "lc_structured_json_schema",
                             "lc_structured_function_calling"}) {
    ASSERT_TRUE(seen[object].is_object() && !seen[object].contains("error"))
        << object << ": " << seen[object].dump();
    EXPECT_EQ(test::schema_violation(seen[object], person, person), "")
        << object << ": " << seen[object].dump();
  }
}

}  // namespace
}  // namespace dsinfer::serve_clients_test
