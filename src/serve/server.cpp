#include "serve/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/deepseek_output.h"
#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/log.h"
#include "serve/connection_probe.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/stop_matcher.h"

namespace dsinfer {

namespace {

using json = nlohmann::json;

std::string error_body(const ApiError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}}
      .dump();
}

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
    res.set_content(error_body({error_status, error_status == 500 ? "server_error" : "invalid_request_error", e.what(), "", ""}),
                    "application/json");
  }
}

// What the engine thread tells one request's HTTP thread.
// The log-probability of a sampled token under the model (before temperature), and the most
// likely alternatives at its position.
struct TokenLogprob {
  int32_t token;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;
};

struct Channel {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<int32_t> tokens;
  std::deque<TokenLogprob> logprobs;  // one per token when the request asked for them
  bool finished = false;
  FinishReason reason = FinishReason::kStop;
  std::string error;
  int64_t reused = 0;
};

TokenLogprob token_logprob(const float* row, int64_t vocab, int32_t token, int top) {
  float max = row[0];
  for (int64_t i = 1; i < vocab; ++i) max = std::max(max, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  const double log_z = max + std::log(sum);
  TokenLogprob out{token, static_cast<float>(row[token] - log_z), {}};
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int k = 0; k < top; ++k) out.top.emplace_back(ids[k], static_cast<float>(row[ids[k]] - log_z));
  }
  return out;
}

class Server {
 public:
  Server(const ChatFormatter& chat, const ServeOptions& o) : chat_(chat), tokenizer_(chat.tokenizer()), o_(o) {}

  // Listens at once (503 while loading), loads the model with `load` (collective at world size
  // > 1), serves until a signal, drains, stops the other ranks.
  void run(const std::function<std::unique_ptr<Transformer>()>& load);

  static EngineOptions engine_options(const ServeOptions& o) {
    EngineOptions e;
    e.step_tokens = o.step_tokens;
    e.max_running = o.max_running;
    e.prefix_cache = o.prefix_cache;
    e.mtp = o.mtp;
    e.mtp_auto = o.mtp_auto;
    e.draft_tokens = o.draft_tokens;
    return e;
  }

 private:
  enum State { kLoading, kReady, kDraining };
  // 503 unless the model is loaded and the server is not shutting down.
  void check_ready() const;
  void handle(const httplib::Request& req, httplib::Response& res, bool chat);
  void engine_loop();
  RequestId submit(const Job& job, const std::shared_ptr<Channel>& ch);

  std::unique_ptr<Transformer> model_;
  const ChatFormatter& chat_;
  const Tokenizer& tokenizer_;
  ServeOptions o_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<Engine> engine_;
  std::atomic<int> state_{kLoading};
  std::mutex work_mutex_;
  std::condition_variable work_;
  bool pending_work_ = false, stopping_ = false;
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> next_response_{0};
  ServerMetrics metrics_;
  std::mutex active_mutex_;
  std::set<RequestId> active_;  // submitted and not finished (cancelled at the drain deadline)
};

void Server::check_ready() const {
  const int state = state_;
  if (state == kLoading) reject("the model is still loading; retry shortly", "", 503, "server_error", "loading");
  if (state == kDraining) reject("the server is shutting down", "", 503, "server_error", "shutting_down");
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
  if (logprobs) events.on_logits = [clock](int64_t, const float* row) { clock->row = row; };
  events.on_token = [ch, clock, m, logprobs, top, vocab](int32_t t) {
    TokenLogprob lp{};
    if (logprobs && clock->row) lp = token_logprob(clock->row, vocab, t, top);
    const double now = now_seconds();
    (clock->any ? m->inter_token : m->ttft).observe(now - (clock->any ? clock->last : clock->arrived));
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
    ++(r == FinishReason::kError ? m->requests_failed : r == FinishReason::kCancelled ? m->requests_cancelled
                                                                                        : m->requests_finished);
    if (clock->any) m->e2e.observe(clock->last - clock->arrived);
    std::lock_guard<std::mutex> lock(ch->mutex);
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
    id = engine_->submit(job.prompt, params, std::move(events));
    *active = id;
    active_.insert(id);
  }
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    pending_work_ = true;
  }
  work_.notify_one();
  return id;
}

void Server::engine_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(work_mutex_);
      work_.wait(lock, [&] { return pending_work_ || stopping_; });
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
}

// Turns a request's tokens into OpenAI deltas: detokenize, hold back stop strings, split
// reasoning and tool calls. Runs on the request's HTTP thread.
class Output {
 public:
  Output(const Tokenizer& tokenizer, const Job& job)
      : decoder_(tokenizer, /*skip_special_tokens=*/true), stop_(job.stop), parser_(job.parse), chat_(job.chat) {}
  // The deltas of the next tokens, and whether the stop strings ended the text.
  OutputDelta push(int32_t token) { return route(stop_.push(decoder_.push(token))); }
  OutputDelta finish() {
    OutputDelta d = route(stop_.push(decoder_.finish()));
    append(d, route(stop_.finish()));
    if (chat_) append(d, parser_.finish());
    return d;
  }
  bool stopped() const { return stop_.matched(); }
  bool made_tool_calls() const { return parser_.made_tool_calls(); }

  static void append(OutputDelta& a, const OutputDelta& b) {
    a.reasoning += b.reasoning;
    a.content += b.content;
    for (const ToolCall& c : b.tool_calls) a.tool_calls.push_back(c);
  }

 private:
  OutputDelta route(const std::string& text) {
    if (chat_) return parser_.push(text);
    OutputDelta d;
    d.content = text;
    return d;
  }
  StreamDecoder decoder_;
  StopMatcher stop_;
  DeepSeekOutputParser parser_;
  bool chat_;
};

json logprob_entry(const Tokenizer& tokenizer, int32_t token, float logprob) {
  const std::optional<std::string_view> raw = tokenizer.token_bytes(token);
  const std::string bytes = raw ? std::string(*raw) : std::string();
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(c);
  return {{"token", tokenizer.decode({token}, /*skip_special_tokens=*/false)}, {"logprob", logprob}, {"bytes", b}};
}

// OpenAI's logprobs.content: per token its text, logprob and bytes, with the top alternatives.
json logprobs_json(const Tokenizer& tokenizer, const std::vector<TokenLogprob>& lps) {
  json out = json::array();
  for (const TokenLogprob& lp : lps) {
    json e = logprob_entry(tokenizer, lp.token, lp.logprob);
    json top = json::array();
    for (const auto& [id, value] : lp.top) top.push_back(logprob_entry(tokenizer, id, value));
    e["top_logprobs"] = top;
    out.push_back(std::move(e));
  }
  return out;
}

json usage_json(const Job& job, const Channel& ch, int64_t completion) {
  const int64_t prompt = static_cast<int64_t>(job.prompt.size());
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", ch.reused}}},
              {"prompt_cache_hit_tokens", ch.reused},
              {"prompt_cache_miss_tokens", prompt - ch.reused}};
}

const char* finish_name(FinishReason r, bool stopped, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  if (stopped) return "stop";
  return r == FinishReason::kLength ? "length" : "stop";
}

json tool_calls_json(const std::vector<ToolCall>& calls, int64_t first_index, const std::string& id_prefix,
                     bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", id_prefix + std::to_string(first_index + static_cast<int64_t>(i))},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = first_index + static_cast<int64_t>(i);
    out.push_back(std::move(c));
  }
  return out;
}

void Server::handle(const httplib::Request& req, httplib::Response& res, bool chat) {
  check_ready();
  if (in_flight_.fetch_add(1) >= o_.max_running + o_.max_queued) {
    in_flight_.fetch_sub(1);
    res.set_header("Retry-After", "1");
    throw ApiError{429, "rate_limit_error", "the server is at its limit of running and queued requests; retry later",
                   "", ""};
  }
  struct Release {
    std::atomic<int>& n;
    bool armed = true;
    ~Release() {
      if (armed) n.fetch_sub(1);
    }
  } release{in_flight_};
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    reject(std::string("the body is not valid JSON: ") + e.what());
  }
  const Job job = parse_request(body, chat, chat_, o_.served_model_name, model_->config().max_seq_len);
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_response_++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  auto ch = std::make_shared<Channel>();
  const RequestId rid = submit(job, ch);
  // Waits for the next tokens or the end; with a timeout, false when it passed with neither.
  auto next = [ch](std::vector<int32_t>& got, bool& finished, std::vector<TokenLogprob>* lps = nullptr,
                   double timeout_s = -1) {
    std::unique_lock<std::mutex> lock(ch->mutex);
    auto any = [&] { return !ch->tokens.empty() || ch->finished; };
    if (timeout_s < 0) {
      ch->ready.wait(lock, any);
    } else if (!ch->ready.wait_for(lock, std::chrono::duration<double>(timeout_s), any)) {
      got.clear();
      finished = false;
      return false;
    }
    got.assign(ch->tokens.begin(), ch->tokens.end());
    ch->tokens.clear();
    if (lps) lps->insert(lps->end(), ch->logprobs.begin(), ch->logprobs.end());
    ch->logprobs.clear();
    finished = ch->finished && got.empty();
    return true;
  };
  const std::string object = chat ? "chat.completion" : "text_completion";
  const std::string fingerprint = "dsinfer";
  if (!job.stream) {
    Output output(tokenizer_, job);
    OutputDelta all;
    int64_t completion = 0;
    std::vector<TokenLogprob> lps, kept;
    // Nothing is written until the end, so a client that hangs up is only seen by probing its
    // socket: between tokens, and a few times a second while queued or prefilling.
    const ConnectionProbe probe(req.remote_addr, req.remote_port, req.local_port);
    bool hung_up = false;
    for (;;) {
      std::vector<int32_t> got;
      bool finished = false;
      lps.clear();
      const bool woke = next(got, finished, &lps, 0.1);
      if (finished) break;
      if (!hung_up && !probe.client_connected()) {
        hung_up = true;
        engine_->cancel(rid);  // the loop still waits for the end, which frees the slot
      }
      if (!woke) continue;
      for (size_t i = 0; i < got.size(); ++i) {
        if (output.stopped()) break;  // what came after a stop string is not part of the answer
        ++completion;
        if (i < lps.size()) kept.push_back(lps[i]);
        Output::append(all, output.push(got[i]));
        if (output.stopped()) engine_->cancel(rid);
      }
    }
    if (ch->reason == FinishReason::kError) throw ApiError{500, "server_error", ch->error, "", ""};
    Output::append(all, output.finish());
    const char* reason = finish_name(ch->reason, output.stopped(), output.made_tool_calls());
    json choice = {{"index", 0}, {"finish_reason", reason},
                   {"logprobs", job.logprobs ? json{{"content", logprobs_json(tokenizer_, kept)}} : json(nullptr)}};
    if (chat) {
      json message = {{"role", "assistant"}, {"content", all.content}};
      if (!all.reasoning.empty() || job.parse.starts_in_reasoning) message["reasoning_content"] = all.reasoning;
      if (!all.tool_calls.empty()) message["tool_calls"] = tool_calls_json(all.tool_calls, 0, "call_" + id + "_", false);
      choice["message"] = message;
    } else {
      choice["text"] = all.content;
    }
    res.set_content(json{{"id", id},
                         {"object", object},
                         {"created", created},
                         {"model", o_.served_model_name},
                         {"system_fingerprint", fingerprint},
                         {"choices", json::array({choice})},
                         {"usage", usage_json(job, *ch, completion)}}
                        .dump(),
                    "application/json");
    return;
  }
  // streaming: the provider runs on this request's thread until the end. The guard lives as long
  // as the provider (httplib drops it with the response, called or not): it frees the slot and
  // cancels a request nobody reads any more.
  release.armed = false;
  auto self = this;
  auto job_ptr = std::make_shared<const Job>(job);
  struct StreamGuard {
    Server* server;
    std::shared_ptr<Channel> ch;
    RequestId rid;
    ~StreamGuard() {
      bool finished;
      {
        std::lock_guard<std::mutex> lock(ch->mutex);
        finished = ch->finished;
      }
      if (!finished) server->engine_->cancel(rid);
      server->in_flight_.fetch_sub(1);
    }
  };
  // (new + braces: clang 14 has no parenthesized aggregate init for make_shared)
  auto guard = std::shared_ptr<StreamGuard>(new StreamGuard{this, ch, rid});
  res.set_chunked_content_provider("text/event-stream", [=](size_t, httplib::DataSink& sink) {
    const Job* job = job_ptr.get();
    (void)guard;
    const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
    auto send = [&](const json& j) {
      const std::string s = "data: " + j.dump() + "\n\n";
      return sink.write(s.data(), s.size());
    };
    std::vector<TokenLogprob> unsent;  // logprobs of tokens whose text has not gone out yet
    auto chunk = [&](const json& delta_or_text, const json& finish) {
      json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
      if (job->logprobs && !unsent.empty()) {
        choice["logprobs"] = json{{"content", logprobs_json(self->tokenizer_, unsent)}};
        unsent.clear();
      }
      if (chat) choice["delta"] = delta_or_text;
      else choice["text"] = delta_or_text;
      return json{{"id", id}, {"object", chunk_object}, {"created", created}, {"model", self->o_.served_model_name},
                  {"system_fingerprint", fingerprint}, {"choices", json::array({choice})}};
    };
    Output output(self->tokenizer_, *job);
    int64_t completion = 0, tool_index = 0;
    bool cancelled = false, alive = true;
    auto emit = [&](const OutputDelta& d) {
      if (!alive || d.empty()) return;
      if (!chat) {
        alive = send(chunk(d.content, nullptr));
        return;
      }
      json delta = json::object();
      if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
      if (!d.content.empty()) delta["content"] = d.content;
      if (!d.tool_calls.empty()) {
        delta["tool_calls"] = tool_calls_json(d.tool_calls, tool_index, "call_" + id + "_", true);
        tool_index += static_cast<int64_t>(d.tool_calls.size());
      }
      alive = send(chunk(delta, nullptr));
    };
    if (chat) alive = send(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr));
    std::vector<TokenLogprob> lps;
    for (;;) {
      std::vector<int32_t> got;
      bool finished = false;
      lps.clear();
      if (!next(got, finished, &lps, self->o_.keep_alive_seconds)) {
        // queued, or between slow tokens: an SSE comment keeps proxies from timing out, and a
        // failed write tells that the client went away
        static const std::string keep_alive = ": keep-alive\n\n";
        if (alive && !sink.write(keep_alive.data(), keep_alive.size())) {
          alive = false;
          self->engine_->cancel(rid);
          cancelled = true;
        }
        continue;
      }
      if (finished) break;
      for (size_t i = 0; i < got.size(); ++i) {
        if (output.stopped() || !alive) break;
        ++completion;
        if (i < lps.size()) unsent.push_back(lps[i]);
        emit(output.push(got[i]));
        if ((output.stopped() || !alive) && !cancelled) {
          self->engine_->cancel(rid);  // a stop string, or the client went away
          cancelled = true;
        }
      }
    }
    if (!alive) return false;
    if (ch->reason == FinishReason::kError) {
      send(json{{"error", {{"message", ch->error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
    } else {
      emit(output.finish());
      send(chunk(chat ? json::object() : json(""), finish_name(ch->reason, output.stopped(), output.made_tool_calls())));
      if (job->include_usage) {
        json u = chunk(json::object(), nullptr);
        u["choices"] = json::array();
        u["usage"] = usage_json(*job, *ch, completion);
        send(u);
      }
    }
    const std::string end = "data: [DONE]\n\n";
    sink.write(end.data(), end.size());
    sink.done();
    return true;
  });
}

void Server::run(const std::function<std::unique_ptr<Transformer>()>& load) {
  httplib::Server http;
  const int threads = o_.max_running + o_.max_queued + 4;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_tcp_nodelay(true);
  http.set_payload_max_length(static_cast<size_t>(o_.max_body));
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  http.set_keep_alive_max_count(100);
  auto authorized = [&](const httplib::Request& req) {
    if (o_.api_key.empty()) return true;
    const std::string want = "Bearer " + o_.api_key, got = req.get_header_value("Authorization");
    unsigned diff = static_cast<unsigned>(want.size() ^ got.size());
    for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(want[i]) ^ (i < got.size() ? static_cast<unsigned char>(got[i]) : 0u);
    return diff == 0;  // constant time in the key's length
  };
  auto api = [&](bool chat) {
    return [&, chat](const httplib::Request& req, httplib::Response& res) {
      answer(res, 500, [&] {
        if (!authorized(req)) throw ApiError{401, "invalid_request_error", "Incorrect API key provided", "", "invalid_api_key"};
        handle(req, res, chat);
      });
    };
  };
  http.Post("/v1/chat/completions", api(true));
  http.Post("/v1/completions", api(false));
  http.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) {
      res.status = 401;
      res.set_content(error_body({401, "invalid_request_error", "Incorrect API key provided", "", "invalid_api_key"}),
                      "application/json");
      return;
    }
    if (state_ != kReady) {
      res.status = 503;
      res.set_content(error_body({503, "server_error", "the model is still loading or the server is shutting down", "", ""}),
                      "application/json");
      return;
    }
    res.set_content(json{{"object", "list"},
                         {"data", json::array({{{"id", o_.served_model_name},
                                                {"object", "model"},
                                                {"created", 0},
                                                {"owned_by", "dsinfer"},
                                                {"max_model_len", model_->config().max_seq_len}}})}}
                        .dump(),
                    "application/json");
  });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    const int state = state_;
    if (state != kReady) res.status = 503;
    res.set_content(state == kReady ? R"({"status":"ok"})" : state == kLoading ? R"({"status":"loading"})" : R"({"status":"draining"})",
                    "application/json");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  // POST /tokenize {"prompt": "..."} or {"messages": [...]} (the rendered chat prompt);
  // POST /detokenize {"tokens": [...]}.
  auto tool = [&](auto&& body_to_json) {
    return [&, body_to_json](const httplib::Request& req, httplib::Response& res) {
      answer(res, 400, [&] {
        if (!authorized(req)) throw ApiError{401, "invalid_request_error", "Incorrect API key provided", "", "invalid_api_key"};
        json body;
        try {
          body = json::parse(req.body);
        } catch (const json::exception& e) {
          reject(std::string("the body is not valid JSON: ") + e.what());
        }
        if (!body.is_object()) reject("the request body must be a JSON object");
        check_ready();
        res.set_content(body_to_json(body).dump(), "application/json");
      });
    };
  };
  http.Post("/tokenize", tool([&](const json& body) {
    const std::vector<int32_t> ids = tokenize_request(body, chat_);
    return json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model_->config().max_seq_len}};
  }));
  http.Post("/detokenize", tool([&](const json& body) {
    const json& t = body.value("tokens", json());
    if (!t.is_array()) reject("tokens must be a list of token ids", "tokens");
    std::vector<int32_t> ids;
    for (const json& x : t) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= model_->config().vocab_size)
        reject(cat("tokens must be ids in [0, ", model_->config().vocab_size, ")"), "tokens");
      ids.push_back(x.get<int32_t>());
    }
    return json{{"prompt", tokenizer_.decode(ids, /*skip_special_tokens=*/false)}};
  }));
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int s = res.status;
    const std::string message = s == 404 ? "no such endpoint" : s == 413 ? "the request body exceeds --max-body" : "error";
    res.set_content(error_body({s, "invalid_request_error", message, "", ""}), "application/json");
  });

  // Bind before the (possibly long) load: a port in use is an error at once, and clients see 503
  // "loading" instead of a refused connection.
  const int port = o_.port == 0 ? http.bind_to_any_port(o_.host) : (http.bind_to_port(o_.host, o_.port) ? o_.port : -1);
  check(port >= 0, "serve: cannot listen on ", o_.host, ":", o_.port, " (in use, or not an address of this machine)");
  if (!raise_listen_backlog(port, 1024)) log_debug("serve: the listen backlog stays cpp-httplib's 5");
  if (o_.api_key.empty() && o_.host != "127.0.0.1" && o_.host != "localhost" && o_.host != "::1")
    log_info("warning: serve: listening on ", o_.host, " without an API key (--api-key): anyone who can reach it can use it");
  std::thread listener([&] { http.listen_after_bind(); });
  try {
    model_ = load();
    cache_ = std::make_unique<KVCache>(model_->config(),
                                       kv_budget_or_default(o_.kv_cache_tokens, model_->config(), o_.kv_dtype), o_.kv_dtype);
    metrics_.kv_block_positions = kKVBlock;
    metrics_.kv_bytes_per_position = cache_->bytes_per_position();
    metrics_.kv_budget_blocks = cache_->total_blocks();
    log_info("serve: KV cache of ", cache_->budget_positions(), " positions (", kv_dtype_name(o_.kv_dtype), ", ",
             cache_->budget_bytes() / (1 << 20), " MiB at most)");
    engine_ = std::make_unique<Engine>(*model_, *cache_, engine_options(o_));
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  std::thread engine_thread([&] { engine_loop(); });
  state_ = kReady;
  log_info("serve: ", o_.served_model_name, " on http://", o_.host, ":", port, " (", o_.max_running, " running, ",
           o_.max_queued, " queued at most)");
  // SIGINT / SIGTERM (blocked in every thread, see block_shutdown_signals): drain, then stop
  const sigset_t signals = block_shutdown_signals();
  int sig = 0;
  sigwait(&signals, &sig);
  state_ = kDraining;  // new requests get 503; running ones finish
  log_info("serve: signal ", sig, ", draining ", in_flight_.load(), " request(s)");
  const double deadline = now_seconds() + o_.drain_seconds;
  while (in_flight_ > 0 && now_seconds() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (in_flight_ > 0) {
    log_info("serve: ", in_flight_.load(), " request(s) still running after ", o_.drain_seconds, " s: cancelling them");
    std::lock_guard<std::mutex> lock(active_mutex_);
    for (RequestId id : active_) engine_->cancel(id);
  }
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    pending_work_ = true;  // the engine thread takes the cancellations
  }
  work_.notify_one();
  http.stop();
  listener.join();
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  engine_thread.join();
  engine_->stop();
}

}  // namespace

sigset_t block_shutdown_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void serve(const std::function<std::unique_ptr<Transformer>()>& load, Comm& comm, const ChatFormatter& chat,
           const ServeOptions& options) {
  check(options.max_running >= 1 && options.max_queued >= 0 && options.max_body >= 1 && options.step_tokens >= 1,
        "serve: --max-running, --max-body and --step-tokens must be >= 1, --max-queued >= 0");
  if (comm.rank() != 0) {
    auto model = load();
    KVCache cache(model->config(), kv_budget_or_default(options.kv_cache_tokens, model->config(), options.kv_dtype),
                  options.kv_dtype);
    Engine engine(*model, cache, Server::engine_options(options));
    while (engine.follow()) {
    }
    return;
  }
  Server server(chat, options);
  server.run(load);
}

}  // namespace dsinfer
