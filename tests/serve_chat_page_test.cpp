// The built-in chat page at GET / in a real browser (tests/openai_client/page_check.mjs: Debian's
// chromium headless, driven by puppeteer-core, installed by scripts/test.sh): a message typed with
// a seed gets the API's streamed answer for the same request, Stop ends a long answer and the
// server cancels it, and with DeepSeek-R1's template the reasoning shows apart from the answer. The
// screenshots are kept in build/tests/artifacts (chat_page.png, chat_page_reasoning.png). Skipped
// without node, the npm packages or chromium (scripts/install-deps.sh --browser installs it; CI
// does).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "story_server.h"
#include "test_support.h"

namespace dsinfer::serve_chat_page_test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kNpm = fs::path(DSINFER_BIN).parent_path() / "npm";

std::string why_skip() {
  if (std::system("command -v node > /dev/null") != 0) return "node not installed";
  if (!fs::exists(kNpm / "node_modules" / "puppeteer-core") || !fs::exists(kNpm / "page_check.mjs"))
    return "puppeteer-core is not installed in " + kNpm.string() + " (scripts/test.sh does it)";
  if (!fs::exists("/usr/bin/chromium"))
    return "chromium is not installed (scripts/install-deps.sh --browser)";
  return "";
}

// The story server, and its count of cancelled requests.
class Server : public test::StoryServer {
 public:
  using StoryServer::StoryServer;
  // dsinfer_requests_cancelled_total
  double cancelled() const {
    const std::string m = client().Get("/metrics")->body;
    const std::string key = "\ndsinfer_requests_cancelled_total ";
    const size_t at = m.find(key);
    return at == std::string::npos ? -1 : std::stod(m.substr(at + key.size()));
  }
};

json run_page(const Server& s, const std::string& prompt, const std::string& shot) {
  const std::string cmd = "cd " + kNpm.string() + " && PORT=" + std::to_string(s.port()) +
                          " PROMPT='" + prompt + "' SEED=7 TEMPERATURE=0.8 MAX_TOKENS=30 SHOT='" +
                          shot + "' timeout 120 node page_check.mjs";
  const auto r = test::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json result = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(result.is_discarded()) << r.out << r.err;
  return result;
}

json api_answer(const Server& s, const std::string& prompt) {
  const json body = {{"messages", {{{"role", "user"}, {"content", prompt}}}},
                     {"stream", false},
                     {"temperature", 0.8},
                     {"max_tokens", 30},
                     {"seed", 7}};
  auto r = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200);
  return json::parse(r->body)["choices"][0];
}

TEST(ServeChatPage, ABrowserGetsTheApisAnswerAndStopCancels) {
  if (const std::string why = why_skip(); !why.empty()) GTEST_SKIP() << why;
  Server server;
  auto page = server.client().Get("/");
  ASSERT_TRUE(page && page->status == 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_EQ(page->body.find("http://"), std::string::npos) << "no external resources";
  EXPECT_EQ(page->body.find("https://"), std::string::npos) << "no external resources";
  const double cancelled_before = server.cancelled();
  const fs::path artifacts = fs::path(DSINFER_BIN).parent_path() / "tests" / "artifacts";
  fs::create_directories(artifacts);
  const std::string shot = (artifacts / "chat_page.png").string();
  fs::remove(shot);
  const std::string prompt = "Once upon a time there was a little fox";
  const json result = run_page(server, prompt, shot);
  EXPECT_EQ(result["errors"], json::array()) << result.dump();
  const json api = api_answer(server, prompt);
  EXPECT_EQ(result["first"]["answer"], api["message"]["content"]) << result.dump();
  EXPECT_EQ(result["first"]["done"], "done (" + api["finish_reason"].get<std::string>() + ")");
  EXPECT_EQ(result["second"]["done"], "stopped") << result.dump();
  EXPECT_TRUE(fs::exists(shot) && fs::file_size(shot) > 1000) << shot;
  // the stopped answer's request was cancelled on the server
  for (int i = 0; i < 50 && server.cancelled() < cancelled_before + 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server.cancelled(), cancelled_before + 1);
}

TEST(ServeChatPage, ReasoningShowsApartFromTheAnswer) {
  if (const std::string why = why_skip(); !why.empty()) GTEST_SKIP() << why;
  // R1's template opens the answer with <think>: the story model's text is all reasoning
  Server server({"--chat-template", test::data_path("chat_templates/deepseek-r1.jinja")});
  const std::string prompt = "Think about a small bird";
  const fs::path artifacts = fs::path(DSINFER_BIN).parent_path() / "tests" / "artifacts";
  fs::create_directories(artifacts);
  const json result = run_page(server, prompt, (artifacts / "chat_page_reasoning.png").string());
  EXPECT_EQ(result["errors"], json::array()) << result.dump();
  const json api = api_answer(server, prompt);
  ASSERT_TRUE(api["message"].contains("reasoning_content")) << api.dump();
  EXPECT_EQ(result["first"]["reasoning"], api["message"]["reasoning_content"]) << result.dump();
  EXPECT_EQ(result["first"]["answer"], api["message"]["content"]) << result.dump();
}

}  // namespace
}  // namespace dsinfer::serve_chat_page_test
