// The official `openai` npm client (v6, installed by scripts/test.sh into build/npm) against
// `dsinfer serve`: what it reads must be the reference's greedy answer, streamed or not, with
// usage, the model list and an error as the client raises it. Skipped when node or the package
// is missing (then scripts/test.sh could not reach npm).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "parallel/free_port.h"
#include "test_support.h"

extern char** environ;

namespace dsinfer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(ServeOpenAiClient, TheOfficialClientReadsTheReferenceAnswer) {
  const fs::path npm = fs::path(DSINFER_BIN).parent_path() / "npm";
  if (!fs::exists(npm / "node_modules" / "openai") || !fs::exists(npm / "check.mjs"))
    GTEST_SKIP() << "the openai npm package is not installed in " << npm
                 << " (scripts/test.sh installs it)";
  if (std::system("command -v node > /dev/null") != 0) GTEST_SKIP() << "node not installed";
  const json golden =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/chat-mp1-fp32.json")));
  const std::string out = golden["batch"]["stdout"];
  const size_t p = out.find("Prompt: ") + 8, nl = out.find("\nCompletion: "),
               end = out.find("\n\n", nl);
  const std::string prompt = out.substr(p, nl - p), completion = out.substr(nl + 13, end - nl - 13);
  ASSERT_EQ(golden["max_new_tokens"], 40) << "check.mjs asks for 40 tokens";

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
  const std::string quoted = "'" + prompt + "'";  // the golden prompts hold no single quote
  ASSERT_EQ(prompt.find('\''), std::string::npos);
  auto r = test::run_command("cd " + npm.string() + " && PORT=" + std::to_string(port) +
                             " MODEL=story PROMPT=" + quoted + " timeout 60 node check.mjs");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json seen = json::parse(r.out);
  EXPECT_EQ(seen["chat"], completion);
  EXPECT_EQ(seen["streamed"], completion);
  EXPECT_EQ(seen["usage"]["completion_tokens"], seen["streamed_usage"]["completion_tokens"]);
  EXPECT_EQ(seen["completion_tokens"], 5);
  EXPECT_EQ(seen["models"], json::array({"story"}));
  EXPECT_EQ(seen["error"]["status"], 404);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "SIGTERM should end the server with status 0";
}

}  // namespace
}  // namespace dsinfer
