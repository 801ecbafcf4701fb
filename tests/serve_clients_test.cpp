// The Vercel AI SDK (@ai-sdk/openai-compatible) and LangChain.js (@langchain/openai), pinned in
// tests/openai_client/package.json and installed by scripts/test.sh, against `dsinfer serve`
// (tests/openai_client/clients_check.mjs): generateText, streamText, invoke and stream read the
// reference's greedy answer; generateObject, generateText with Output.object and
// withStructuredOutput (by JSON Schema, and by function calling: a forced tool call) return objects
// valid against their zod schema. Skipped when node or the packages are missing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "json_schema_validator.h"
#include "parallel/free_port.h"
#include "test_support.h"

extern char** environ;

namespace dsinfer {
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
  const json golden =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/chat-mp1-fp32.json")));
  const std::string out = golden["batch"]["stdout"];
  const size_t p = out.find("Prompt: ") + 8, nl = out.find("\nCompletion: "),
               end = out.find("\n\n", nl);
  const std::string prompt = out.substr(p, nl - p), completion = out.substr(nl + 13, end - nl - 13);
  ASSERT_EQ(golden["max_new_tokens"], 40) << "clients_check.mjs asks for 40 tokens";
  ASSERT_EQ(prompt.find('\''), std::string::npos);

  const int port = pick_free_port();
  const std::string ckpt = test::convert_golden("tiny-v3-story", 1, /*with_tokenizer=*/true);
  std::vector<std::string> args = {
      DSINFER_BIN,           "serve", "--ckpt-path", ckpt,
      "--served-model-name", "story", "--port",      std::to_string(port)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, DSINFER_BIN, nullptr, nullptr, argv.data(), environ), 0);
  httplib::Client health("127.0.0.1", port);
  for (int i = 0; i < 200; ++i) {  // up to 20 s for the load
    if (auto h = health.Get("/health"); h && h->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto r = test::run_command("cd " + npm.string() + " && PORT=" + std::to_string(port) +
                             " MODEL=story PROMPT='" + prompt +
                             "' AI_SDK_LOG_WARNINGS=false timeout 180 node clients_check.mjs");
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
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
}  // namespace dsinfer
