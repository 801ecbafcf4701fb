// The HTTP endpoints of serve (serve/server.h): the OpenAI API, the informational GETs and the
// chat page, the tokenizer's endpoints. Registered by Server::run before it binds.
#include <httplib.h>

#include "serve/chat_page.h"
#include "serve/http_policy.h"
#include "serve/server_impl.h"

namespace dsinfer::serve_detail {

namespace {
// The 401 of a request without the key (OpenAI's words and code).
ApiError unauthorized() {
  return {401, "invalid_request_error", "Incorrect API key provided", "", "invalid_api_key"};
}
}  // namespace

bool Server::authorized(const httplib::Request& req) const {
  return authorized_by(req.get_header_value("Authorization"), o_.api_key);
}

bool Server::open_to(const httplib::Request& req, httplib::Response& res) const {
  if (!authorized(req)) {
    res.status = 401;
    res.set_content(error_body(unauthorized()), "application/json");
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
}

json Server::model_object() const {
  return json{{"id", o_.served_model_name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "dsinfer"},
              {"max_model_len", model_->config().max_seq_len}};
}

// POST /v1/chat/completions and /v1/completions (and the methods and origins every endpoint
// answers).
void Server::add_completion_endpoints(GuardedHttpServer& http) {
  allow_cross_origin(http, o_.allowed_origins);
  refuse_other_methods(http,
                       {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"},
                       {"/", "/v1/models", "/props", "/health", "/metrics"});
  auto api = [&](bool chat) {
    return [&, chat](const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader& reader) {
      answer(res, 500, [&] {
        const std::string body = read_body(req, reader, o_.max_body, res);
        if (!authorized(req)) throw unauthorized();
        handle(req, body, res, chat);
      });
    };
  };
  http.Post("/v1/chat/completions", api(true));
  http.Post("/v1/completions", api(false));
}

// GET /v1/models[/{id}], /props, /, /health, /metrics.
void Server::add_info_endpoints(GuardedHttpServer& http) {
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
}

// POST /tokenize and /detokenize, and the body of errors httplib answers itself.
void Server::add_token_endpoints(GuardedHttpServer& http) {
  // POST /tokenize {"prompt": "..."} or {"messages": [...]} (the rendered chat prompt);
  // POST /detokenize {"tokens": [...]}.
  auto tool = [&](auto&& body_to_json) {
    return [&, body_to_json](const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader& reader) {
      answer(res, 400, [&] {
        const std::string text = read_body(req, reader, o_.max_body, res);
        if (!authorized(req)) throw unauthorized();
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
}

}  // namespace dsinfer::serve_detail
