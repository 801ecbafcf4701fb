#include "serve/server.h"

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
#include "serve/structured_output.h"
#include "serve/token_channel.h"

namespace dsinfer {

namespace {

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
                                                   const ModelConfig& config) {
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  return std::make_unique<GrammarEngine>(grammar_vocabulary(tokenizer, config.vocab_size), threads);
}

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
  // The engine failed (a rank died: its step or heartbeat threw): every request still open ends
  // with `why` as its error, new ones get 503, and run() is woken to stop with it.
  void fail_every_request(const std::string& why);
  RequestId submit(const Job& job, const std::shared_ptr<Channel>& ch);

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
constexpr auto kHeartbeat = std::chrono::seconds(2);

void Server::check_ready() const {
  const int state = state_;
  if (state == kLoading)
    reject("the model is still loading; retry shortly", "", 503, "server_error", "loading");
  if (state == kDraining)
    reject("the server is shutting down", "", 503, "server_error", "shutting_down");
  if (state == kFailed) {
    std::lock_guard<std::mutex> lock(active_mutex_);
    reject(failure_, "", 503, "server_error", "rank_failed");
  }
}

RequestId Server::submit(const Job& job, const std::shared_ptr<Channel>& ch) {
  // The callbacks run on the engine thread; they also keep the metrics.
  struct Clock {
    double arrived = now_seconds(), last = 0;
    bool started = false, any = false;
    const float* row = nullptr;  // the logits the next token is sampled from (logprobs)
  };
  auto clock = std::make_shared<Clock>();
  ServerMetrics* m = &metrics_;
  const int64_t prompt_tokens = static_cast<int64_t>(job.prompt.size());
  ++m->requests_waiting;
  RequestEvents events;
  const bool logprobs = job.logprobs;
  const int top = job.top_logprobs;
  const int64_t vocab = model_->config().vocab_size;
  if (logprobs) {
    // with echo, every prompt position's row comes first (params.prompt_logits): the row at
    // position p scores prompt token p + 1; the last one is the first token's, as without echo
    const bool echo_logprobs = job.echo && logprobs;
    const std::vector<int32_t> prompt = echo_logprobs ? job.prompt : std::vector<int32_t>();
    events.on_logits = [clock, ch, echo_logprobs, prompt, top, vocab](int64_t position,
                                                                      const float* row) {
      clock->row = row;
      if (!echo_logprobs || position + 1 >= static_cast<int64_t>(prompt.size())) return;
      TokenLogprob lp = token_logprob(row, vocab, prompt[position + 1], top);
      std::lock_guard<std::mutex> lock(ch->mutex);
      ch->prompt_logprobs.push_back(std::move(lp));
    };
  }
  events.on_token = [ch, clock, m, logprobs, top, vocab](int32_t t) {
    TokenLogprob lp{};
    if (logprobs && clock->row) lp = token_logprob(clock->row, vocab, t, top);
    const double now = now_seconds();
    (clock->any ? m->inter_token : m->ttft)
        .observe(now - (clock->any ? clock->last : clock->arrived));
    clock->any = true;
    clock->last = now;
    ++m->generation_tokens;
    std::lock_guard<std::mutex> lock(ch->mutex);
    ch->tokens.push_back(t);
    if (logprobs) ch->logprobs.push_back(std::move(lp));
    ch->ready.notify_all();
  };
  events.on_start = [ch, clock, m, prompt_tokens](int64_t reused) {
    clock->started = true;
    --m->requests_waiting;
    ++m->requests_running;
    m->prompt_tokens += prompt_tokens;
    m->prefix_cache_hit_tokens += reused;
    std::lock_guard<std::mutex> lock(ch->mutex);
    ch->reused = reused;
  };
  auto active = std::make_shared<RequestId>(-1);  // the id, known once submit returns
  events.on_finish = [this, ch, clock, m, active](FinishReason r, const std::string& e) {
    {
      std::lock_guard<std::mutex> lock(active_mutex_);
      active_.erase(*active);
    }
    --(clock->started ? m->requests_running : m->requests_waiting);
    std::lock_guard<std::mutex> lock(ch->mutex);
    const bool cancelled = r == FinishReason::kCancelled && !ch->stopped_by_text;
    ++(r == FinishReason::kError ? m->requests_failed
       : cancelled               ? m->requests_cancelled
                                 : m->requests_finished);
    if (clock->any) m->e2e.observe(clock->last - clock->arrived);
    ch->finished = true;
    ch->reason = r;
    ch->error = e;
    ch->ready.notify_all();
  };
  RequestId id;
  {
    // under the lock: on_finish (engine thread) erases the id only after it is recorded
    std::lock_guard<std::mutex> lock(active_mutex_);
    SamplingParams params = job.params;
    params.token_logits = logprobs;  // the rows logprobs read, gathered on every rank
    params.prompt_logits = job.echo && logprobs;
    id = engine_->submit(job.prompt, params, std::move(events));
    *active = id;
    if (state_ == kFailed) {  // after fail_every_request's sweep: no step will ever end it
      std::lock_guard<std::mutex> ch_lock(ch->mutex);
      ch->finished = true;
      ch->reason = FinishReason::kError;
      ch->error = failure_;
    } else {
      active_.emplace(id, ch);
    }
  }
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    pending_work_ = true;
  }
  work_.notify_one();
  return id;
}

void Server::engine_loop() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(work_mutex_);
        if (!work_.wait_for(lock, kHeartbeat, [&] { return pending_work_ || stopping_; })) {
          lock.unlock();
          engine_->pause();  // idle: the heartbeat (a no-op at world size 1)
          continue;
        }
        if (stopping_) return;
        pending_work_ = false;
      }
      while (engine_->step()) {
        metrics_.mtp_drafted = engine_->stats().drafted;
        metrics_.mtp_accepted = engine_->stats().accepted;
        metrics_.kv_used_blocks = cache_->used_blocks();
        if (const PrefixCache* prefix = engine_->prefix_cache()) {
          metrics_.prefix_cache_blocks = prefix->nodes();
          metrics_.prefix_cache_evictions = prefix->evictions();
        }
      }
      engine_->pause();  // the other ranks wait for the next orders (none at world size 1)
    }
  } catch (const std::exception& e) {  // CommError: a rank died or stopped answering
    fail_every_request(e.what());
  }
}

void Server::fail_every_request(const std::string& why) {
  const std::string message = "a rank failed: " + why;  // (run() ends with it as the error line)
  {
    std::lock_guard<std::mutex> lock(active_mutex_);
    failure_ = message;
    state_ = kFailed;
    for (auto& [id, ch] : active_) {
      std::lock_guard<std::mutex> ch_lock(ch->mutex);
      ch->finished = true;
      ch->reason = FinishReason::kError;
      ch->error = message;
      ch->ready.notify_all();
      ++metrics_.requests_failed;
    }
    active_.clear();
  }
  kill(getpid(), SIGTERM);  // run()'s sigwait: stop, and exit with the failure
}

// Waits until `ch` has a token or has ended; false when the client of this thread's request
// went away meanwhile.
bool wait_for_first_token(Channel& ch) {
  const int client_socket = GuardedHttpServer::request_socket();
  std::unique_lock<std::mutex> lock(ch.mutex);
  while (ch.tokens.empty() && !ch.finished) {
    if (ch.ready.wait_for(lock, std::chrono::milliseconds(100)) == std::cv_status::timeout &&
        !client_connected(client_socket))
      return false;
  }
  return true;
}

// The X-Request-Id to answer with: the request's own when it is 1-128 printable ASCII
// characters, else the response's id.
std::string request_id_header(const httplib::Request& req, const std::string& response_id) {
  const std::string theirs = req.get_header_value("X-Request-Id");
  const bool sane =
      !theirs.empty() && theirs.size() <= 128 &&
      std::all_of(theirs.begin(), theirs.end(), [](unsigned char c) { return c > 32 && c < 127; });
  return sane ? theirs : response_id;
}

void Server::handle(const httplib::Request& req, const std::string& body_text,
                    httplib::Response& res, bool chat) {
  check_ready();
  const json body = parse_body(body_text);
  std::vector<Job> jobs =
      parse_requests(body, chat, chat_, o_.served_model_name, model_->config().max_seq_len);
  // structured output: compiled here, on the request's thread (the engine's constraint then
  // comes from the compiled grammars' cache); what the grammar engine refuses is a 400
  for (Job& job : jobs)
    if (job.params.grammar.kind != OutputGrammar::Kind::kNone) {
      keep_schema_order(body_text, job.grammar_param, job.params.grammar);
      try {
        grammar_->validate(job.params.grammar);
      } catch (const Error& e) {
        reject(e.what(), job.grammar_param);
      }
    }
  // every choice is a sequence: n per prompt, each a slot
  const int slots = static_cast<int>(jobs.size()) * jobs[0].n;
  if (in_flight_.fetch_add(slots) + slots > o_.max_running + o_.max_queued) {
    in_flight_.fetch_sub(slots);
    res.set_header("Retry-After", "1");
    throw ApiError{429, "rate_limit_error",
                   "the server is at its limit of running and queued requests; retry later", "",
                   ""};
  }
  // frees the slot when the response is written (a stream hands it on to its provider)
  struct Release {
    std::atomic<int>& in_flight;
    int slots;
    bool armed = true;
    ~Release() {
      if (armed) in_flight.fetch_sub(slots);
    }
  } release{in_flight_, slots};
  Response r{(chat ? "chatcmpl-" : "cmpl-") + launch_id_ + "-" + std::to_string(next_response_++),
             static_cast<int64_t>(std::time(nullptr)),
             chat,
             std::move(jobs),
             {}};
  // X-Request-Id: the client's own (for its logs and tracing) when it sent a sane one, else ours
  res.set_header("X-Request-Id", request_id_header(req, r.id));
  for (size_t p = 0; p < r.jobs.size(); ++p)
    for (int i = 0; i < r.jobs[p].n; ++i) {
      Job one = r.jobs[p];
      one.params.choice = i;
      Choice c{std::make_shared<Channel>(), -1, p};
      c.rid = submit(one, c.ch);
      r.choices.push_back(std::move(c));
      // choices 1 .. n-1 go in once choice 0 has its first token: its prompt's blocks are in the
      // prefix cache by then, so they prefill only the last partial block instead of the prompt
      if (i == 0 && r.jobs[p].n > 1 && !wait_for_first_token(*r.choices.back().ch)) {
        engine_->cancel(r.choices.back().rid);
        return;  // the client left (the slots are freed on the way out)
      }
    }
  if (!r.jobs[0].stream) return respond_whole(res, r);
  release.armed = false;
  respond_stream(res, r);
}

// Tool call ids: call_<response>_<k> for the first choice (as with n = 1), call_<response>_<i>_<k>
// for choice i > 0.
std::string tool_id_prefix(const std::string& response_id, size_t choice) {
  return "call_" + response_id + "_" + (choice == 0 ? "" : std::to_string(choice) + "_");
}

// usage of a response: every prompt once (not per choice), the prefix cache's tokens of each
// prompt's first choice.
json Server::usage(const Response& r, int64_t completion_tokens, int64_t reasoning_tokens) {
  int64_t prompt = 0, reused = 0;
  for (const Job& job : r.jobs) prompt += static_cast<int64_t>(job.prompt.size());
  for (size_t k = 0; k < r.choices.size(); k += static_cast<size_t>(r.jobs[0].n)) {
    std::lock_guard<std::mutex> lock(r.choices[k].ch->mutex);
    reused += r.choices[k].ch->reused;
  }
  return usage_json(prompt, reused, completion_tokens, reasoning_tokens);
}

json Server::response_head(const Response& r, const char* object) const {
  return json{{"id", r.id},
              {"object", object},
              {"created", r.created},
              {"model", o_.served_model_name},
              {"system_fingerprint", "dsinfer"}};
}

// Cancelled with the client still there and no stop string: only the drain deadline does that.
// The answer is incomplete, so it is an error, not a finish_reason "stop".
constexpr char kCutOffMessage[] =
    "the server shut down before this answer was complete (its --drain deadline passed)";
bool cut_off(FinishReason reason, const Output& output) {
  return reason == FinishReason::kCancelled && !output.stopped();
}

void Server::respond_whole(httplib::Response& res, const Response& r) {
  // Nothing is written until the end, so a client that hangs up is only seen by probing its
  // socket: between tokens, and a few times a second while queued or prefilling.
  const int client_socket = GuardedHttpServer::request_socket();
  auto cancel_all = [&] {
    for (const Choice& c : r.choices) engine_->cancel(c.rid);
  };
  json choices = json::array();
  int64_t completion_tokens = 0, reasoning_tokens = 0;
  for (size_t i = 0; i < r.choices.size(); ++i) {
    const Choice& c = r.choices[i];
    const Job& job = r.jobs[c.job];
    Output output(tokenizer_, job);
    OutputDelta all;
    std::vector<TokenLogprob> kept;
    OutputSink sink;
    sink.wait_seconds = 0.1;
    sink.client_there = [client_socket](bool) { return client_connected(client_socket); };
    sink.deliver = [&](const OutputDelta& d, const TokenLogprob* lp) {
      if (lp) kept.push_back(*lp);
      Output::append(all, d);
      return true;
    };
    const PumpResult pumped = pump_tokens(*c.ch, output, cancel_all, sink);
    if (c.ch->reason == FinishReason::kError) {
      cancel_all();
      throw ApiError{500, "server_error", c.ch->error, "", ""};
    }
    if (cut_off(c.ch->reason, output))
      throw ApiError{503, "server_error", kCutOffMessage, "", "shutting_down"};
    completion_tokens += pumped.completion_tokens;
    reasoning_tokens += output.reasoning_tokens();
    Output::append(all, output.finish());
    const char* reason = finish_name(c.ch->reason, output.stopped(), output.made_tool_calls());
    json choice = {{"index", i}, {"finish_reason", reason}, {"logprobs", nullptr}};
    if (job.logprobs && r.chat) {
      choice["logprobs"] = json{{"content", logprobs_json(tokenizer_, kept)}};
    } else if (job.logprobs) {  // the legacy shape, the prompt's tokens first with echo
      std::vector<TokenLogprob> all_lps;
      if (job.echo) {
        all_lps.push_back({job.prompt[0], 0.0f, {}});
        std::lock_guard<std::mutex> lock(c.ch->mutex);
        all_lps.insert(all_lps.end(), c.ch->prompt_logprobs.begin(), c.ch->prompt_logprobs.end());
      }
      all_lps.insert(all_lps.end(), kept.begin(), kept.end());
      choice["logprobs"] = legacy_logprobs_json(tokenizer_, all_lps, job.echo);
    }
    if (r.chat) {
      json message = {{"role", "assistant"}, {"content", all.content}};
      if (!all.reasoning.empty() || job.parse.starts_in_reasoning)
        message["reasoning_content"] = all.reasoning;
      if (!all.tool_calls.empty())
        message["tool_calls"] = tool_calls_json(all.tool_calls, 0, tool_id_prefix(r.id, i), false);
      choice["message"] = message;
    } else {
      choice["text"] = job.echo ? job.prompt_text + all.content : all.content;
    }
    choices.push_back(std::move(choice));
  }
  json out = response_head(r, r.chat ? "chat.completion" : "text_completion");
  out["choices"] = std::move(choices);
  out["usage"] = usage(r, completion_tokens, reasoning_tokens);
  res.set_content(out.dump(), "application/json");
}

// Server-sent events: the provider runs on this request's thread until the end. The guard lives
// as long as the provider (httplib drops it with the response, called or not): it frees the slot
// and cancels a request nobody reads any more.
void Server::respond_stream(httplib::Response& res, const Response& r) {
  struct StreamGuard {
    Server* server;
    std::vector<Choice> choices;
    ~StreamGuard() {
      for (const Choice& c : choices) {
        bool finished;
        {
          std::lock_guard<std::mutex> lock(c.ch->mutex);
          finished = c.ch->finished;
        }
        if (!finished) server->engine_->cancel(c.rid);
      }
      server->in_flight_.fetch_sub(static_cast<int>(choices.size()));
    }
  };
  // (new + braces: clang 14 has no parenthesized aggregate init for make_shared)
  auto guard = std::shared_ptr<StreamGuard>(new StreamGuard{this, r.choices});
  auto response = std::make_shared<const Response>(r);
  res.set_chunked_content_provider("text/event-stream",
                                   [this, guard, response](size_t, httplib::DataSink& sink) {
                                     (void)guard;
                                     return stream_events(*response, sink);
                                   });
}

bool Server::stream_events(const Response& r, httplib::DataSink& sink) {
  const Job& first = r.jobs[0];  // (the options every prompt shares)
  double last_write = now_seconds();
  auto send = [&](const json& j) {
    const std::string s = "data: " + j.dump() + "\n\n";
    last_write = now_seconds();
    return sink.write(s.data(), s.size());
  };
  size_t index = 0;                  // the choice being streamed
  std::vector<TokenLogprob> unsent;  // logprobs of tokens whose text has not gone out yet
  auto chunk = [&](const json& delta_or_text, const json& finish) {
    json choice = {{"index", index}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (first.logprobs && !unsent.empty()) {
      choice["logprobs"] = json{{"content", logprobs_json(tokenizer_, unsent)}};
      unsent.clear();
    }
    choice[r.chat ? "delta" : "text"] = delta_or_text;
    json out = response_head(r, r.chat ? "chat.completion.chunk" : "text_completion");
    out["choices"] = json::array({choice});
    return out;
  };
  int64_t tool_index = 0;
  auto emit = [&](const OutputDelta& d) {
    if (d.empty()) return true;
    if (!r.chat) return send(chunk(d.content, nullptr));
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.tool_calls.empty()) {
      delta["tool_calls"] =
          tool_calls_json(d.tool_calls, tool_index, tool_id_prefix(r.id, index), true);
      tool_index += static_cast<int64_t>(d.tool_calls.size());
    }
    return send(chunk(delta, nullptr));
  };
  bool alive = true;
  OutputSink out;
  // a client that hangs up is seen on its socket within a tenth of a second (queued, prefilling
  // or between tokens: a write would only fail once the peer's reset came back), so it frees its
  // slot at once; silent for --keep-alive seconds, the stream gets an SSE comment, which keeps
  // proxies from timing out
  const int client_socket = GuardedHttpServer::request_socket();  // (providers run on its thread)
  out.wait_seconds = std::min(0.1, o_.keep_alive_seconds);
  out.client_there = [&](bool timed_out) {
    static const std::string keep_alive = ": keep-alive\n\n";
    if (!alive || !client_connected(client_socket)) return false;
    if (!timed_out || now_seconds() - last_write < o_.keep_alive_seconds) return true;
    last_write = now_seconds();
    return sink.write(keep_alive.data(), keep_alive.size());
  };
  out.deliver = [&](const OutputDelta& d, const TokenLogprob* lp) {
    if (lp) unsent.push_back(*lp);
    return alive = emit(d);
  };
  auto cancel_all = [&] {
    for (const Choice& c : r.choices) engine_->cancel(c.rid);
  };
  // the choices one after the other (each generates meanwhile; clients assemble them by index)
  int64_t completion_tokens = 0, reasoning_tokens = 0;
  bool failed = false;
  for (index = 0; index < r.choices.size() && !failed; ++index) {
    const Choice& c = r.choices[index];
    Output output(tokenizer_, r.jobs[c.job]);
    tool_index = 0;
    unsent.clear();
    if (r.chat) alive = send(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr));
    const PumpResult pumped = pump_tokens(*c.ch, output, cancel_all, out);
    if (pumped.client_gone || !alive) return false;
    if (c.ch->reason == FinishReason::kError || cut_off(c.ch->reason, output)) {
      const bool error = c.ch->reason == FinishReason::kError;
      send(json{{"error",
                 {{"message", error ? c.ch->error : std::string(kCutOffMessage)},
                  {"type", "server_error"},
                  {"param", nullptr},
                  {"code", error ? json(nullptr) : json("shutting_down")}}}});
      cancel_all();
      failed = true;
      break;
    }
    emit(output.finish());
    send(chunk(r.chat ? json::object() : json(""),
               finish_name(c.ch->reason, output.stopped(), output.made_tool_calls())));
    completion_tokens += pumped.completion_tokens;
    reasoning_tokens += output.reasoning_tokens();
  }
  if (!failed && first.include_usage) {
    json u = chunk(json::object(), nullptr);
    u["choices"] = json::array();
    u["usage"] = usage(r, completion_tokens, reasoning_tokens);
    send(u);
  }
  const std::string end = "data: [DONE]\n\n";
  sink.write(end.data(), end.size());
  sink.done();
  return true;
}

void Server::run(const std::function<std::unique_ptr<Transformer>()>& load) {
  ConnectionLimits limits;
  limits.max_connections = o_.max_connections;
  limits.request_seconds = o_.request_timeout_seconds;
  GuardedHttpServer http(limits);
  http.set_tcp_nodelay(true);
  http.set_payload_max_length(static_cast<size_t>(o_.max_body));
  http.set_keep_alive_max_count(100);
  auto authorized = [&](const httplib::Request& req) {
    return authorized_by(req.get_header_value("Authorization"), o_.api_key);
  };
  allow_cross_origin(http, o_.allowed_origins);
  refuse_other_methods(http,
                       {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"},
                       {"/", "/v1/models", "/props", "/health", "/metrics"});
  auto model_object = [&] {
    return json{{"id", o_.served_model_name},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "dsinfer"},
                {"max_model_len", model_->config().max_seq_len}};
  };
  auto api = [&](bool chat) {
    return [&, chat](const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader& reader) {
      answer(res, 500, [&] {
        const std::string body = read_body(req, reader, o_.max_body, res);
        if (!authorized(req))
          throw ApiError{401, "invalid_request_error", "Incorrect API key provided", "",
                         "invalid_api_key"};
        handle(req, body, res, chat);
      });
    };
  };
  http.Post("/v1/chat/completions", api(true));
  http.Post("/v1/completions", api(false));
  // The GET endpoints behind the key: false (with a 401 or a 503 written) unless this request
  // may have an answer now.
  auto open_to = [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) {
      res.status = 401;
      res.set_content(error_body({401, "invalid_request_error", "Incorrect API key provided", "",
                                  "invalid_api_key"}),
                      "application/json");
      return false;
    }
    if (state_ != kReady) {
      res.status = 503;
      res.set_content(
          error_body({503, "server_error",
                      "the model is still loading or the server is shutting down", "", ""}),
          "application/json");
      return false;
    }
    return true;
  };
  // GET /v1/models lists the served model; GET /v1/models/{id} is it (openai.models.retrieve)
  http.Get(R"(/v1/models(/(.+))?)", [&](const httplib::Request& req, httplib::Response& res) {
    if (!open_to(req, res)) return;
    if (req.matches.size() > 2 && req.matches[2].matched) {
      const std::string id = req.matches[2].str();
      if (id != o_.served_model_name) {
        res.status = 404;
        res.set_content(error_body({404, "invalid_request_error",
                                    "The model `" + id + "` does not exist (this server serves `" +
                                        o_.served_model_name + "`)",
                                    "model", "model_not_found"}),
                        "application/json");
        return;
      }
      res.set_content(model_object().dump(), "application/json");
      return;
    }
    res.set_content(json{{"object", "list"}, {"data", json::array({model_object()})}}.dump(),
                    "application/json");
  });
  // GET /props: what a client (or a person) may want to know before asking: the context, the
  // defaults of the request fields, the limits and the cache (llama.cpp's server has a /props)
  http.Get("/props", [&](const httplib::Request& req, httplib::Response& res) {
    if (!open_to(req, res)) return;
    const ModelConfig& c = model_->config();
    res.set_content(
        json{{"model", o_.served_model_name},
             {"max_model_len", c.max_seq_len},
             {"vocab_size", c.vocab_size},
             {"defaults",
              {{"temperature", 1.0},
               {"top_p", 1.0},
               {"top_k", 0},
               {"min_p", 0.0},
               {"max_tokens", "the context the prompt leaves"},
               {"seed", "drawn per request unless given"},
               {"n", 1}}},
             {"limits",
              {{"max_running", o_.max_running},
               {"max_queued", o_.max_queued},
               {"max_body_bytes", o_.max_body},
               {"max_connections", o_.max_connections},
               {"n", 16},
               {"prompts_per_request", 64}}},
             {"kv_cache",
              {{"dtype", kv_dtype_name(o_.kv_dtype)},
               {"budget_positions", cache_->budget_positions()},
               {"block_positions", kKVBlock},
               {"prefix_cache", o_.prefix_cache}}},
             {"speculative_decoding",
              {{"mtp", o_.mtp}, {"auto", o_.mtp_auto}, {"draft_tokens", o_.draft_tokens}}},
             {"world_size", model_->comm().world_size()}}
            .dump(),
        "application/json");
  });
  // the chat page (serve/chat_page.h): static, so open without the key (the page asks for it)
  http.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(chat_page_html(), "text/html; charset=utf-8");
  });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    const int state = state_;
    if (state != kReady) res.status = 503;
    if (state == kFailed) {
      std::lock_guard<std::mutex> lock(active_mutex_);
      res.set_content(json{{"status", "failed"}, {"error", failure_}}.dump(
                          -1, ' ', false, json::error_handler_t::replace),
                      "application/json");
      return;
    }
    res.set_content(state == kReady     ? R"({"status":"ok"})"
                    : state == kLoading ? R"({"status":"loading"})"
                                        : R"({"status":"draining"})",
                    "application/json");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  // POST /tokenize {"prompt": "..."} or {"messages": [...]} (the rendered chat prompt);
  // POST /detokenize {"tokens": [...]}.
  auto tool = [&](auto&& body_to_json) {
    return [&, body_to_json](const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader& reader) {
      answer(res, 400, [&] {
        const std::string text = read_body(req, reader, o_.max_body, res);
        if (!authorized(req))
          throw ApiError{401, "invalid_request_error", "Incorrect API key provided", "",
                         "invalid_api_key"};
        const json body = parse_body(text);
        if (!body.is_object()) reject("the request body must be a JSON object");
        check_ready();
        res.set_content(body_to_json(body).dump(), "application/json");
      });
    };
  };
  http.Post("/tokenize", tool([&](const json& body) {
              const std::vector<int32_t> ids = tokenize_request(body, chat_);
              return json{{"tokens", ids},
                          {"count", ids.size()},
                          {"max_model_len", model_->config().max_seq_len}};
            }));
  http.Post("/detokenize", tool([&](const json& body) {
              const json& t = body.value("tokens", json());
              if (!t.is_array()) reject("tokens must be a list of token ids", "tokens");
              std::vector<int32_t> ids;
              for (const json& x : t) {
                if (!x.is_number_integer() || x.get<int64_t>() < 0 ||
                    x.get<int64_t>() >= model_->config().vocab_size)
                  reject(cat("tokens must be ids in [0, ", model_->config().vocab_size, ")"),
                         "tokens");
                ids.push_back(x.get<int32_t>());
              }
              return json{{"prompt", tokenizer_.decode(ids, /*skip_special_tokens=*/false)}};
            }));
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int s = res.status;
    const std::string message = s == 404   ? "no such endpoint"
                                : s == 413 ? "the request body exceeds --max-body"
                                           : "error";
    res.set_content(error_body({s, "invalid_request_error", message, "", ""}), "application/json");
  });

  // Bind before the (possibly long) load: a port in use is an error at once, and clients see 503
  // "loading" instead of a refused connection.
  const int port = http.bind_port(o_.host, o_.port);
  check(port >= 0, "serve: cannot listen on ", o_.host, ":", o_.port,
        " (in use, or not an address of this machine)");
  if (o_.api_key.empty() && o_.host != "127.0.0.1" && o_.host != "localhost" && o_.host != "::1")
    log_info("warning: serve: listening on ", o_.host,
             " without an API key (--api-key): anyone who can reach it can use it");
  std::thread listener([&] { http.listen_after_bind(); });
  try {
    model_ = load();
    cache_ = std::make_unique<KVCache>(
        model_->config(), kv_budget_or_default(o_.kv_cache_tokens, model_->config(), o_.kv_dtype),
        o_.kv_dtype);
    metrics_.kv_block_positions = kKVBlock;
    metrics_.kv_bytes_per_position = cache_->bytes_per_position();
    metrics_.kv_budget_blocks = cache_->total_blocks();
    log_info("serve: KV cache of ", cache_->budget_positions(), " positions (",
             kv_dtype_name(o_.kv_dtype), ", ", cache_->budget_bytes() / (1 << 20), " MiB at most)");
    grammar_ = make_grammar_engine(tokenizer_, model_->config());
    engine_ = std::make_unique<Engine>(*model_, *cache_, engine_options(o_, *grammar_));
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  std::thread engine_thread([&] { engine_loop(); });
  state_ = kReady;
  log_info("serve: ", o_.served_model_name, " on http://", o_.host, ":", port, " (", o_.max_running,
           " running, ", o_.max_queued, " queued at most)");
  // SIGINT / SIGTERM (blocked in every thread, see block_shutdown_signals): drain, then stop
  const sigset_t signals = block_shutdown_signals();
  int sig = 0;
  sigwait(&signals, &sig);
  int expected = kReady;
  const bool failed = !state_.compare_exchange_strong(expected, kDraining);  // (else kFailed)
  if (!failed) log_info("serve: signal ", sig, ", draining ", in_flight_.load(), " request(s)");
  // (a failed engine has ended every request with its error: what is in flight is being written)
  const double deadline = now_seconds() + o_.drain_seconds;
  while (in_flight_ > 0 && now_seconds() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (in_flight_ > 0) {
    log_info("serve: ", in_flight_.load(), " request(s) still running after ", o_.drain_seconds,
             " s: cancelling them");
    std::lock_guard<std::mutex> lock(active_mutex_);
    for (const auto& entry : active_) engine_->cancel(entry.first);
  }
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    pending_work_ = true;  // the engine thread takes the cancellations
  }
  work_.notify_one();
  // the responses being written (cancelled streams' last events) get a second; then every
  // connection is closed, slow clients' too, so that stopping waits on no client
  http.close_connections(1.0);
  http.stop();
  listener.join();
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  engine_thread.join();
  if (failed) {
    std::lock_guard<std::mutex> lock(active_mutex_);
    throw CommError(failure_);  // the program's `error:` line and exit status 1
  }
  engine_->stop();
}

}  // namespace

sigset_t block_shutdown_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // SIGTERM as `dsinfer run` forwards it through mpirun
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void serve(const std::function<std::unique_ptr<Transformer>()>& load, Comm& comm,
           const ChatFormatter& chat, const ServeOptions& options) {
  check(options.max_running >= 1 && options.max_queued >= 0 && options.max_body >= 1 &&
            options.step_tokens >= 1 && options.max_connections >= 1,
        "serve: --max-running, --max-body, --step-tokens and --max-connections must be >= 1, "
        "--max-queued >= 0");
  check(options.request_timeout_seconds > 0 && options.request_timeout_seconds <= 86400,
        "serve: --request-timeout must be a number of seconds in (0, 86400]");
  if (comm.rank() != 0) {
    auto model = load();
    KVCache cache(model->config(),
                  kv_budget_or_default(options.kv_cache_tokens, model->config(), options.kv_dtype),
                  options.kv_dtype);
    const auto grammar = make_grammar_engine(chat.tokenizer(), model->config());
    Engine engine(*model, cache, Server::engine_options(options, *grammar));
    while (engine.follow()) {
    }
    return;
  }
  Server server(chat, options);
  server.run(load);
}

}  // namespace dsinfer
