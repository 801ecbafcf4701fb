#include "serve/server.h"

#include "serve/server_impl.h"

namespace dsinfer {

namespace serve_detail {

std::unique_ptr<GrammarEngine> make_grammar_engine(const Tokenizer& tokenizer,
                                                   const ModelConfig& config) {
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  return std::make_unique<GrammarEngine>(grammar_vocabulary(tokenizer, config.vocab_size), threads);
}

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

void Server::run(const std::function<std::unique_ptr<Transformer>()>& load) {
  ConnectionLimits limits;
  limits.max_connections = o_.max_connections;
  limits.request_seconds = o_.request_timeout_seconds;
  GuardedHttpServer http(limits);
  http.set_tcp_nodelay(true);
  http.set_payload_max_length(static_cast<size_t>(o_.max_body));
  http.set_keep_alive_max_count(100);
  add_completion_endpoints(http);
  add_info_endpoints(http);
  add_token_endpoints(http);

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

}  // namespace serve_detail

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
    const auto grammar = serve_detail::make_grammar_engine(chat.tokenizer(), model->config());
    Engine engine(*model, cache, serve_detail::Server::engine_options(options, *grammar));
    while (engine.follow()) {
    }
    return;
  }
  serve_detail::Server server(chat, options);
  server.run(load);
}

}  // namespace dsinfer