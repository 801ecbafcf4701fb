// serve's Server (serve/server.h) as its three files share it: server.cpp (start, engine thread,
// drain, stop), server_requests.cpp (a completion request from body to answer, whole or streamed),
// server_endpoints.cpp (the HTTP endpoints). Internal to src/serve.
#pragma once

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/deepseek_output.h"
#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/log.h"
#include "grammar/grammar_engine.h"
#include "parallel/comm.h"
#include "serve/chat_page.h"
#include "serve/connection_probe.h"
#include "serve/guarded_http_server.h"
#include "serve/http_policy.h"
#include "serve/metrics.h"
#include "serve/output.h"
#include "serve/request.h"
#include "serve/responses.h"
#include "serve/server.h"
#include "serve/structured_output.h"
#include "serve/token_channel.h"

namespace dsinfer::serve_detail {

using json = nlohmann::json;

// Runs `work`; an ApiError becomes its OpenAI error response, any other Error one with
// `error_status` (500 where it can only be ours, 400 where the input caused it).
template <class Work>
void answer(httplib::Response& res, int error_status, Work&& work) {
  try {
    work();
  } catch (const ApiError& e) {
    res.status = e.status;
    res.set_content(error_body(e), "application/json");
  } catch (const Error& e) {
    res.status = error_status;
    res.set_content(
        error_body({error_status, error_status == 500 ? "server_error" : "invalid_request_error",
                    e.what(), "", ""}),
        "application/json");
  }
}

// Every rank's grammar engine over the model's vocabulary (compiling with up to 8 threads).
std::unique_ptr<GrammarEngine> make_grammar_engine(const Tokenizer& tokenizer,
                                                   const ModelConfig& config);

class Server {
 public:
  Server(const ChatFormatter& chat, const ServeOptions& o)
      : chat_(chat), tokenizer_(chat.tokenizer()), o_(o) {}

  // Listens at once (503 while loading), loads the model with `load` (collective at world size
  // > 1), serves until a signal, drains, stops the other ranks.
  void run(const std::function<std::unique_ptr<Transformer>()>& load);

  static EngineOptions engine_options(const ServeOptions& o, GrammarEngine& grammar) {
    EngineOptions e;
    e.make_constraint = grammar.factory();
    e.step_tokens = o.step_tokens;
    e.max_running = o.max_running;
    e.prefix_cache = o.prefix_cache;
    e.mtp = o.mtp;
    e.mtp_auto = o.mtp_auto;
    e.draft_tokens = o.draft_tokens;
    return e;
  }

 private:
  enum State { kLoading, kReady, kDraining, kFailed };
  // 503 unless the model is loaded and the server is neither shutting down nor failed.
  void check_ready() const;
  // One completion of a response: its line to the engine thread and its request there.
  struct Choice {
    std::shared_ptr<Channel> ch;
    RequestId rid = -1;
    size_t job = 0;  // its prompt's Job in Response::jobs
  };
  // One response's identity, its prompts (one, or a completions list) and their choices (`n`
  // per prompt, prompt-major: one engine request each, sampled from the same seed with its own
  // choice index, so each is what it would be alone).
  struct Response {
    std::string id;  // chatcmpl-N / cmpl-N
    int64_t created;
    bool chat;
    std::vector<Job> jobs;
    std::vector<Choice> choices;
  };
  // POST /v1/chat/completions (chat) or /v1/completions: admission, parsing, submission, then
  // the whole response or a stream.
  void handle(const httplib::Request& req, const std::string& body_text, httplib::Response& res,
              bool chat);
  void respond_whole(httplib::Response& res, const Response& r);
  void respond_stream(httplib::Response& res, const Response& r);
  // Writes the stream's events until the request ends; false when the client went away.
  bool stream_events(const Response& r, httplib::DataSink& sink);
  // id, object, created, model, system_fingerprint
  nlohmann::json response_head(const Response& r, const char* object) const;
  static nlohmann::json usage(const Response& r, int64_t completion_tokens,
                              int64_t reasoning_tokens);
  void engine_loop();
  // the endpoints (serve/server_endpoints.cpp)
  void add_completion_endpoints(GuardedHttpServer& http);
  void add_info_endpoints(GuardedHttpServer& http);
  void add_token_endpoints(GuardedHttpServer& http);
  bool authorized(const httplib::Request& req) const;
  // The GET endpoints behind the key: false (with a 401 or a 503 written) unless this request
  // may have an answer now.
  bool open_to(const httplib::Request& req, httplib::Response& res) const;
  nlohmann::json model_object() const;
  // The engine failed (a rank died: its step or heartbeat threw): every request still open ends
  // with `why` as its error, new ones get 503, and run() is woken to stop with it.
  void fail_every_request(const std::string& why);
  RequestId submit(const Job& job, const std::shared_ptr<Channel>& ch);
  RequestEvents request_events(const Job& job, const std::shared_ptr<Channel>& ch,
                               const std::shared_ptr<RequestId>& active);

  std::unique_ptr<Transformer> model_;
  const ChatFormatter& chat_;
  const Tokenizer& tokenizer_;
  ServeOptions o_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<GrammarEngine> grammar_;  // structured output (before engine_: it goes after)
  std::unique_ptr<Engine> engine_;
  std::atomic<int> state_{kLoading};
  std::mutex work_mutex_;
  std::condition_variable work_;
  bool pending_work_ = false, stopping_ = false;
  std::atomic<int> in_flight_{0};
  const std::string launch_id_ = launch_id();  // response ids: <object>-<launch>-<n>
  std::atomic<int64_t> next_response_{0};
  ServerMetrics metrics_;
  mutable std::mutex active_mutex_;
  // submitted and not finished (cancelled at the drain deadline, failed when a rank dies)
  std::map<RequestId, std::shared_ptr<Channel>> active_;
  std::string failure_;  // why the engine failed (under active_mutex_; set once, with kFailed)
};

// How often an idle engine thread tells the other ranks it is alive (a pause order): a rank that
// died is noticed within a few of these, not at the next request.
inline constexpr auto kHeartbeat = std::chrono::seconds(2);

}  // namespace dsinfer::serve_detail
