// `dsinfer serve`: an OpenAI-compatible HTTP server over the engine (docs/SERVING.md). Rank 0
// serves HTTP and schedules; HTTP threads only parse requests, render prompts and write responses,
// while one engine thread steps (and, at world size > 1, broadcasts each step to the other
// ranks, which follow). Endpoints: POST /v1/chat/completions, /v1/completions, /tokenize,
// /detokenize; GET /v1/models[/{id}], /props, /health, /metrics, and the chat page at /. Output is
// split into content, reasoning_content and tool_calls by chat/deepseek_output.h, per request;
// stop strings are held back until decided; structured output and forced tool calls are grammars
// (serve/structured_output.h, grammar/grammar_engine.h). The code: server.cpp (start, engine
// thread, drain), server_requests.cpp (a request to its answer), server_endpoints.cpp.
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_formatter.h"
#include "engine/engine.h"

namespace dsinfer {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;            // empty: no key
  std::string served_model_name;  // default: the checkpoint directory's name
  int max_running = 16;
  int max_queued = 64;
  int64_t max_body = 1 << 20;
  int max_connections = 512;            // HTTP connections open at once (guarded_http_server.h)
  double request_timeout_seconds = 10;  // a request's header and body must arrive in this
  int64_t step_tokens = 256;
  int64_t kv_cache_tokens = 0;  // 0: from the model and free memory
  bool prefix_cache = true;     // reuse cached prompt prefixes (engine/prefix_cache.h)
  // web origins whose pages may call the API (CORS); "*": any (vLLM's and llama.cpp's default).
  // None by default: a page on any site the user visits could otherwise use a server on their
  // machine that has no key (the built-in page at / is same-origin and needs none).
  std::vector<std::string> allowed_origins;
  KVDType kv_dtype = KVDType::kF32;  // the KV cache's element type
  double keep_alive_seconds = 5;  // a silent stream (queued, slow) gets an SSE comment this often
  double drain_seconds = 30;      // after SIGTERM, how long running requests may take to finish
  bool mtp = false;               // speculative decoding with the model's MTP module (loaded)
  bool mtp_auto = false;          // with mtp: draft only where it measured faster
  int draft_tokens = 1;           // with mtp: drafts per sequence and step
};

// Blocks SIGINT, SIGTERM and SIGUSR1 (a SIGTERM as `dsinfer run` hands it through mpirun) in the
// calling thread and every thread it starts later (the model's
// workers included): call it first, so that only serve()'s watcher takes them.
sigset_t block_shutdown_signals();

// Every rank calls it with the same `load` (which loads this rank's shard, a collective at world
// size > 1). Rank 0 binds the port first (an Error when it cannot), answers 503 while `load`
// runs, serves until SIGINT or SIGTERM, then drains (503 to new requests, running ones get up to
// drain_seconds) and tells the other ranks to stop; they follow rank 0's steps until then.
void serve(const std::function<std::unique_ptr<Transformer>()>& load, Comm& comm,
           const ChatFormatter& chat, const ServeOptions& options);

}  // namespace dsinfer
