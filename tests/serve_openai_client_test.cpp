// The official `openai` npm client (v6, installed by scripts/test.sh into build/npm) against
// `dsinfer serve`: what it reads must be the reference's greedy answer, streamed or not, with
// usage, the model list and an error as the client raises it. Skipped when node or the package
// is missing (then scripts/test.sh could not reach npm).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "story_server.h"
#include "test_support.h"

namespace dsinfer::serve_openai_client_test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(ServeOpenAiClient, TheOfficialClientReadsTheReferenceAnswer) {
  const fs::path npm = fs::path(DSINFER_BIN).parent_path() / "npm";
  if (!fs::exists(npm / "node_modules" / "openai") || !fs::exists(npm / "check.mjs"))
    GTEST_SKIP() << "the openai npm package is not installed in " << npm
                 << " (scripts/test.sh installs it)";
  if (std::system("command -v node > /dev/null") != 0) GTEST_SKIP() << "node not installed";
  const auto [prompt, completion] = test::golden_story_chat();
  test::StoryServer server;
  auto r = test::run_command("cd " + npm.string() + " && PORT=" + std::to_string(server.port()) +
                             " MODEL=story PROMPT='" + prompt + "' timeout 60 node check.mjs");
  const int status = server.terminate();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json seen = json::parse(r.out);
  EXPECT_EQ(seen["chat"], completion);
  EXPECT_EQ(seen["streamed"], completion);
  EXPECT_EQ(seen["usage"]["completion_tokens"], seen["streamed_usage"]["completion_tokens"]);
  EXPECT_EQ(seen["completion_tokens"], 5);
  EXPECT_EQ(seen["models"], json::array({"story"}));
  EXPECT_EQ(seen["error"]["status"], 404);
  EXPECT_EQ(status, 0) << "SIGTERM should end the server with status 0";
}

}  // namespace
}  // namespace dsinfer::serve_openai_client_test
