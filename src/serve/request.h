// An OpenAI-style request body -> one engine request (Job): every field checked, the chat rendered
// with the checkpoint's template and tokenized. Bad input is an ApiError carrying the HTTP status,
// the OpenAI error type and the offending parameter, never a crash: the bodies come from the
// network (tests/fuzz/fuzz_request.cpp feeds it arbitrary JSON).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_formatter.h"
#include "chat/deepseek_output.h"
#include "engine/sampling.h"

namespace dsinfer {

// An error the client caused or must see: its HTTP status and OpenAI error type.
struct ApiError {
  int status;
  std::string type, message, param, code;
};

[[noreturn]] inline void reject(const std::string& message, const std::string& param = "",
                                int status = 400, const std::string& type = "invalid_request_error",
                                const std::string& code = "") {
  throw ApiError{status, type, message, param, code};
}

// The deepest nesting of arrays and objects a request body may have. Parsing is iterative, but
// copying a json value recurses once per level: a body ~200k levels deep overflowed the stack in
// the copies request handling makes.
constexpr int kMaxBodyDepth = 128;

// An HTTP body as JSON; a 400 when it is not JSON or nests deeper than kMaxBodyDepth (refused
// while parsing, before anything copies it).
nlohmann::json parse_body(const std::string& text);

// One parsed request.
struct Job {
  bool chat = true;
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  int n = 1;  // choices: as many engine requests, choice 0 .. n - 1 of the same seed
  // /v1/completions: the prompt as the client gave it (ids decoded), and whether the answer
  // starts with it (echo; with logprobs, the prompt tokens' logprobs first)
  std::string prompt_text;
  bool echo = false;
  OutputParserOptions parse;
  // Structured output: the request field params.grammar came from (serve/structured_output.h)
  std::string grammar_param;
};

// body[name] as a T (fallback when absent or null); another type is a 400 naming the field.
template <class T>
T field(const nlohmann::json& body, const char* name, T fallback, const char* what) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  try {
    return body[name].get<T>();
  } catch (const nlohmann::json::exception&) {
    reject(std::string(name) + " must be " + what, name);
  }
}

// OpenAI messages (content as a string or text parts, roles incl. developer) -> the messages a
// chat template expects.
nlohmann::json template_messages(const nlohmann::json& messages);

// Parses a body of POST /v1/chat/completions (chat) or /v1/completions; `served_model_name` is
// what "model" must say, `max_seq_len` bounds prompt plus max_tokens.
Job parse_request(const nlohmann::json& body, bool chat, const ChatFormatter& chat_formatter,
                  const std::string& served_model_name, int64_t max_seq_len);
// The same for every prompt of a completions body whose prompt is a list of prompts (strings or
// lists of token ids; at most 64), else the one Job.
std::vector<Job> parse_requests(const nlohmann::json& body, bool chat,
                                const ChatFormatter& chat_formatter,
                                const std::string& served_model_name, int64_t max_seq_len);

// POST /tokenize (vLLM's extra endpoint): {"prompt": ..., "add_special_tokens"} or {"messages",
// "tools", "chat_template_kwargs"} -> token ids.
std::vector<int32_t> tokenize_request(const nlohmann::json& body,
                                      const ChatFormatter& chat_formatter);

}  // namespace dsinfer
