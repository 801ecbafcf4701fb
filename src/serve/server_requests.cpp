// A completion request in serve (serve/server_impl.h): the body parsed into jobs, each choice
// submitted to the engine with its events, and the answer written whole or as server-sent events.
#include "serve/server_impl.h"

namespace dsinfer::serve_detail {

// The engine's callbacks for one choice (they run on the engine thread): its channel gets the
// tokens, logprobs and the end; the metrics are kept on the way. `active` is the request's id
// once submit() has it (on_finish takes it out of active_).
RequestEvents Server::request_events(const Job& job, const std::shared_ptr<Channel>& ch,
                                     const std::shared_ptr<RequestId>& active) {
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
  return events;
}

RequestId Server::submit(const Job& job, const std::shared_ptr<Channel>& ch) {
  auto active = std::make_shared<RequestId>(-1);  // the id, known once submit returns
  RequestEvents events = request_events(job, ch, active);
  const bool logprobs = job.logprobs;
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
  // A client that sent its request and hung up before it was read (a hang-up storm's kind) costs
  // nothing: no parse, no slot, no prefill. Counted as a slot until a probe noticed, such clients
  // used to fill the queue whenever the provider threads ran late, and real clients got 429s. (One
  // that only closed its sending side reads nginx's 499, never an empty 200.)
  if (!client_connected(GuardedHttpServer::request_socket())) {
    ++metrics_.requests_abandoned;
    throw ApiError{499, "invalid_request_error",
                   "the client closed its connection (or its sending side) before the request was "
                   "read; nothing was run",
                   "", "client_closed_request"};
  }
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
  // events go out as they come: no cache, and nginx-style proxies told not to buffer them
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream",
                                   [this, guard, response](size_t, httplib::DataSink& sink) {
                                     (void)guard;
                                     return stream_events(*response, sink);
                                   });
}

// The SSE event of a choice that failed (a rank's error) or was cut off by the drain deadline.
json stream_error_event(const Channel& ch) {
  const bool error = ch.reason == FinishReason::kError;
  return {{"error",
           {{"message", error ? ch.error : std::string(kCutOffMessage)},
            {"type", "server_error"},
            {"param", nullptr},
            {"code", error ? json(nullptr) : json("shutting_down")}}}};
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
      send(stream_error_event(*c.ch));
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

}  // namespace dsinfer::serve_detail
