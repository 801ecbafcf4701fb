// dsinfer serve: the OpenAI-compatible server (src/serve/server.h) at any world size: rank 0
// listens and schedules, every rank steps together.
#include <filesystem>

#include "chat/chat_formatter.h"
#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/read_file.h"
#include "model_options.h"
#include "serve/server.h"

namespace dsinfer::cli {

namespace {

struct ServeCliOptions {
  ModelOptions model;
  ServeOptions serve;
  std::string api_key_file;
  std::string chat_template_file;  // --chat-template: replaces the checkpoint's template
  bool api_key_given = false;      // --api-key "" must not mean "no authentication" silently
};

std::string read_key(const std::string& path) {
  // a regular file of at most 64 KiB: a FIFO blocked for ever (with SIGTERM already blocked) and
  // /dev/zero was read until memory ran out
  const std::string text = read_input_file(path, "--api-key-file", 64 << 10);
  std::string key = text.substr(0, text.find('\n'));
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  check(!key.empty(), "--api-key-file ", path, " holds no key on its first line");
  return key;
}

void run_serve(ServeCliOptions o) {
  block_shutdown_signals();  // before any thread starts (the model's pool): serve() takes them
  check(o.serve.port >= 0 && o.serve.port <= 65535, "--port must be in [0, 65535]");
  check(!o.api_key_given || !o.serve.api_key.empty(),
        "--api-key is empty: give a key, or leave the flag out to serve without one");
  check(o.serve.api_key.empty() || o.api_key_file.empty(),
        "give --api-key or --api-key-file, not both");
  check(o.serve.kv_cache_tokens >= 0 && o.serve.kv_cache_tokens <= kMaxKVPositions,
        "--kv-cache-tokens must be in [0, ", kMaxKVPositions, "], got ", o.serve.kv_cache_tokens);
  if (!o.api_key_file.empty()) o.serve.api_key = read_key(o.api_key_file);
  if (o.serve.served_model_name.empty())
    o.serve.served_model_name =
        std::filesystem::path(o.model.ckpt_path).lexically_normal().filename().string();
  if (o.serve.served_model_name.empty()) o.serve.served_model_name = "dsinfer";
  const ModelConfig config = o.model.load_config();
  const Tokenizer tokenizer = Tokenizer::load(o.model.ckpt_path);
  const ChatFormatter chat(tokenizer,
                           o.chat_template_file.empty()
                               ? std::string()
                               : read_input_file(o.chat_template_file, "--chat-template", 1 << 20));
  auto comm = make_comm();
  log_info(config.summary());
  ServeOptions serve_options = o.serve;
  serve_options.mtp = o.model.mtp_on();
  serve_options.mtp_auto = o.model.mtp_auto();
  serve_options.draft_tokens = o.model.draft_tokens;
  serve_options.kv_dtype = o.model.kv_dtype();
  serve([&] { return o.model.load_model(config, *comm); }, *comm, chat, serve_options);
}

}  // namespace

Command register_serve(CLI::App& app, const KernelConfig& kernels) {
  CLI::App* sub = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (streaming "
      "with SSE),\n"
      "/tokenize, /detokenize; GET /v1/models, /props, /health, /metrics, and a chat page at /.\n"
      "DeepSeek reasoning goes to reasoning_content, tool calls to tool_calls; response_format, "
      "grammar\n"
      "and tool_choice constrain the answer (structured output).\n"
      "At world size > 1 (mpirun, dsinfer run -n N serve ...) rank 0 listens and every rank "
      "steps.\n"
      "SIGINT or SIGTERM stops listening, lets running requests finish, and exits.");
  auto o = std::make_shared<ServeCliOptions>();
  o->model.add_to(sub, kernels);
  o->model.add_mtp_to(sub);
  o->model.add_kv_cache_dtype_to(sub);
  sub->add_option("--chat-template", o->chat_template_file,
                  "a Jinja chat template file used instead of the checkpoint's (its "
                  "tokenizer_config.json chat_template). Tools a template does not write itself "
                  "go into the system prompt, in the call format the template uses")
      ->check(CLI::ExistingFile);
  sub->add_flag("--prefix-cache,!--no-prefix-cache", o->serve.prefix_cache,
                "reuse the cached blocks of earlier prompts' shared prefixes (default); "
                "--no-prefix-cache prefills "
                "every prompt whole")
      ->capture_default_str();
  sub->add_option("--host", o->serve.host, "address to listen on")->capture_default_str();
  sub->add_option("--port", o->serve.port, "port to listen on (0: any free one, logged)")
      ->capture_default_str();
  sub->add_option("--api-key", o->serve.api_key,
                  "require `Authorization: Bearer KEY` (not on /health and /metrics)")
      ->each([o](const std::string&) { o->api_key_given = true; });
  sub->add_option("--api-key-file", o->api_key_file, "the key on the first line of a file");
  sub->add_option("--served-model-name", o->serve.served_model_name,
                  "the model id (default: the checkpoint dir's name)");
  sub->add_option("--max-running", o->serve.max_running, "most requests decoding at once")
      ->capture_default_str();
  sub->add_option("--max-queued", o->serve.max_queued, "most requests waiting; more get 429")
      ->capture_default_str();
  sub->add_option("--allowed-origins", o->serve.allowed_origins,
                  "web origins whose pages may call the API from a browser (CORS), e.g. "
                  "https://chat.example.com; * allows any. Default: none (the built-in page at / "
                  "is same-origin and needs none)")
      ->capture_default_str();
  sub->add_option("--max-body", o->serve.max_body, "largest request body in bytes; more get 413")
      ->capture_default_str();
  sub->add_option("--max-connections", o->serve.max_connections,
                  "most HTTP connections open at once; past it idle keep-alive ones are closed, "
                  "then new ones get 503")
      ->capture_default_str();
  sub->add_option("--request-timeout", o->serve.request_timeout_seconds,
                  "seconds a request's header and body may take to arrive from its first byte "
                  "(plus 1 s per 500 bytes); slower clients get 408 and are disconnected")
      ->capture_default_str();
  sub->add_option(
         "--keep-alive", o->serve.keep_alive_seconds,
         "seconds a stream may stay silent (queued) before it gets a `: keep-alive` comment")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option(
         "--drain", o->serve.drain_seconds,
         "after SIGTERM or SIGINT, seconds running requests may take to finish (new ones get 503)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--step-tokens", o->serve.step_tokens,
                  "most tokens per engine step (decode rows + prefill chunks)")
      ->capture_default_str();
  sub->add_option("--kv-cache-tokens", o->serve.kv_cache_tokens,
                  "KV cache budget in positions (0: half the free memory, at least max_seq_len)")
      ->capture_default_str();
  return {sub, [o] { run_serve(*o); }};
}

}  // namespace dsinfer::cli
