// `dsinfer serve` on the story model for the real-client tests (serve_openai_client_test,
// serve_clients_test, serve_chat_page_test): started on a free port with the tokenizer beside the
// checkpoint, up once /health says so (20 s at most), ended with SIGTERM; and the reference's first
// greedy chat pair (prompt, 40-token completion) those tests compare with.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "parallel/free_port.h"
#include "test_support.h"

extern char** environ;

namespace dsinfer::test {

class StoryServer {
 public:
  explicit StoryServer(std::vector<std::string> extra = {}) : port_(pick_free_port()) {
    const std::string ckpt = convert_golden("tiny-v3-story", 1, /*with_tokenizer=*/true);
    std::vector<std::string> args = {
        DSINFER_BIN,           "serve", "--ckpt-path", ckpt,
        "--served-model-name", "story", "--port",      std::to_string(port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, DSINFER_BIN, nullptr, nullptr, argv.data(), environ), 0);
    for (int i = 0; i < 200; ++i) {
      if (auto h = client().Get("/health"); h && h->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the server did not come up";
  }
  ~StoryServer() {
    if (pid_ > 0) terminate();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  int port() const { return port_; }
  // SIGTERM; the exit status (128 + signal when killed by one).
  int terminate() {
    const pid_t pid = pid_;
    pid_ = -1;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

// The reference's first chat pair on the story model (golden/tiny-v3-story/chat-mp1-fp32.json):
// its prompt and greedy completion of 40 tokens (the prompts hold no single quote, so a shell
// line may quote them).
inline std::pair<std::string, std::string> golden_story_chat() {
  const nlohmann::json golden =
      nlohmann::json::parse(read_file(data_path("golden/tiny-v3-story/chat-mp1-fp32.json")));
  EXPECT_EQ(golden["max_new_tokens"], 40) << "the client scripts ask for 40 tokens";
  const std::string out = golden["batch"]["stdout"];
  const size_t p = out.find("Prompt: ") + 8, nl = out.find("\nCompletion: "),
               end = out.find("\n\n", nl);
  std::pair<std::string, std::string> pair{out.substr(p, nl - p),
                                           out.substr(nl + 13, end - nl - 13)};
  EXPECT_EQ(pair.first.find('\''), std::string::npos);
  return pair;
}

}  // namespace dsinfer::test
