// `dsinfer serve` on the story model for the serve tests (serve_test, serve_openai_client_test,
// serve_clients_test, serve_chat_page_test): started on a free port with the tokenizer beside the
// checkpoint, on one process or two ranks, up once /health says so (20 s at most), ended with
// SIGTERM; and the reference's first greedy chat pair (prompt, 40-token completion) the real-client
// tests compare with.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
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
  // backend "": one process; "mpi" or "gloo": two ranks through `dsinfer run -n 2 --comm B`.
  // `extra`: more serve flags (with --mtp the checkpoint keeps its MTP layer). stderr goes to
  // the test's scratch dir (serve/stderr).
  explicit StoryServer(std::vector<std::string> extra = {}, const std::string& backend = "")
      : port_(pick_free_port()) {
    const int ranks = backend.empty() ? 1 : 2;
    const bool mtp = std::find(extra.begin(), extra.end(), "--mtp") != extra.end();
    const std::string ckpt =
        convert_golden("tiny-v3-story", ranks, /*with_tokenizer=*/true, /*keep_mtp=*/mtp);
    std::vector<std::string> args = {DSINFER_BIN, "--threads", backend.empty() ? "2" : "1"};
    if (!backend.empty()) args.insert(args.end(), {"run", "-n", "2", "--comm", backend});
    args.insert(args.end(), {"serve", "--ckpt-path", ckpt, "--served-model-name", "story", "--port",
                             std::to_string(port_)});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = scratch_dir("serve") + "/stderr";
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, DSINFER_BIN, &files, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&files);
    for (int i = 0; i < 200; ++i) {  // up to 20 s for the load
      if (auto r = client().Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the server did not come up";
  }
  ~StoryServer() {
    if (pid_ > 0) terminate();  // SIGTERM: a launcher passes it on to its ranks
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    // a hang guard, not a speed bound: under AddressSanitizer with other tests on the 2 cores, 24
    // concurrent structured-output answers took longer than 60 s to finish
    c.set_read_timeout(kAddressSanitizer ? 300 : 60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& h = {}) const {
    return client().Post(path.c_str(), h, body, "application/json");
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
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
