#include "serve/request.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "serve/structured_output.h"

namespace dsinfer {

using json = nlohmann::json;

namespace {

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const json& v = body[name];
  if (!v.is_number()) reject(std::string(name) + " must be a number", name);
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    reject(cat(name, " must be between ", lo, " and ", hi, ", got ", json_excerpt(v)), name);
  return d;
}

int64_t integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const json& v = body[name];
  if (!v.is_number_integer()) reject(std::string(name) + " must be an integer", name);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    reject(cat(name, " must be at most ", hi), name);
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) reject(cat(name, " must be between ", lo, " and ", hi, ", got ", i), name);
  return i;
}

// "content" as a string or a list of text parts.
std::string content_text(const json& content, size_t index) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (!content.is_array()) reject(where + " must be a string or a list of text parts", where);
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      reject(where + " supports only text parts ({\"type\": \"text\", \"text\": ...})", where);
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

json parse_body(const std::string& text) {
  struct TooDeep {};
  try {
    // the callback sees each value's depth as it starts (the outermost is 0)
    return json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxBodyDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    reject(cat("the body nests arrays and objects deeper than ", kMaxBodyDepth, " levels"));
  } catch (const json::exception& e) {
    reject(std::string("the body is not valid JSON: ") + e.what());
  }
}

json template_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    reject("messages must be a non-empty list", "messages");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      reject(where + " needs a role", where);
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" &&
        role != "developer")
      reject(where + ".role must be system, user, assistant or tool, got \"" + role + "\"",
             where + ".role");
    const json content = m.value("content", json());
    // an assistant turn that only called tools has no content: the templates test `content is none`
    json t = {
        {"role", role == "developer" ? "system" : role},
        {"content", content.is_null() && role == "assistant" ? json(nullptr)
                                                             : json(content_text(content, i))}};
    for (const char* key : {"tool_calls", "tool_call_id", "name"})
      if (m.contains(key) && !m[key].is_null()) t[key] = m[key];
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

std::vector<std::string> stop_strings(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& s = body["stop"];
  if (s.is_string()) return {s.get<std::string>()};
  if (!s.is_array() || s.size() > 16)
    reject("stop must be a string or a list of at most 16 strings", "stop");
  std::vector<std::string> out;
  for (const json& x : s) {
    if (!x.is_string()) reject("stop must be a string or a list of at most 16 strings", "stop");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// The penalties, logit_bias, min_p, min_tokens and stop_token_ids of a request (OpenAI's ranges
// where OpenAI has the field, vLLM's otherwise).
void sampling_adjustments(const json& body, int64_t vocab, SamplingParams& p) {
  p.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0, -2, 2));
  p.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0, -2, 2));
  p.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 1, 0.01, 100));
  p.min_p = static_cast<float>(number(body, "min_p", 0, 0, 1));
  p.min_tokens = static_cast<int>(integer(body, "min_tokens", 0, 0, 1 << 30));
  if (p.min_tokens > p.max_new_tokens)
    reject(
        cat("min_tokens (", p.min_tokens, ") must be at most max_tokens (", p.max_new_tokens, ")"),
        "min_tokens");
  const json bias = body.value("logit_bias", json());
  if (!bias.is_null()) {
    if (!bias.is_object() || bias.size() > 1024)
      reject("logit_bias must be an object of at most 1024 token ids (as strings) to numbers",
             "logit_bias");
    for (const auto& [key, value] : bias.items()) {
      int64_t id = -1;
      if (!key.empty() && key.size() <= 10 &&
          key.find_first_not_of("0123456789") == std::string::npos)
        id = std::stoll(key);
      if (id < 0 || id >= vocab)
        reject(cat("logit_bias keys must be token ids in [0, ", vocab, "), got \"",
                   key.substr(0, 32), "\""),
               "logit_bias");
      if (!value.is_number() || !std::isfinite(value.get<double>()) ||
          std::fabs(value.get<double>()) > 100)
        reject(cat("logit_bias values must be numbers between -100 and 100 (token ", id, ")"),
               "logit_bias");
      p.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
    std::sort(p.logit_bias.begin(), p.logit_bias.end());
  }
  const json ids = body.value("stop_token_ids", json());
  if (!ids.is_null()) {
    if (!ids.is_array() || ids.size() > 64)
      reject("stop_token_ids must be a list of at most 64 token ids", "stop_token_ids");
    for (const json& t : ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
        reject(cat("stop_token_ids must be token ids in [0, ", vocab, ")"), "stop_token_ids");
      const int32_t id = t.get<int32_t>();
      if (std::find(p.stop_ids.begin(), p.stop_ids.end(), id) == p.stop_ids.end())
        p.stop_ids.push_back(id);
    }
  }
}

}  // namespace

Job parse_request(const json& body, bool chat, const ChatFormatter& chat_formatter,
                  const std::string& served_model_name, int64_t max_seq_len) {
  const Tokenizer& tokenizer = chat_formatter.tokenizer();
  if (!body.is_object()) reject("the request body must be a JSON object");
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) reject("model must be a string", "model");
    if (body["model"].get<std::string>() != served_model_name)
      reject("The model `" + body["model"].get<std::string>() +
                 "` does not exist (this server serves `" + served_model_name + "`)",
             "model", 404, "invalid_request_error", "model_not_found");
  }
  Job job;
  job.n = static_cast<int>(integer(body, "n", 1, 1, 16));
  if (body.contains("best_of") && !body["best_of"].is_null() &&
      integer(body, "best_of", 1, 1, 16) != job.n)
    reject("best_of is not supported (only equal to n)", "best_of");
  if (chat) {
    job.logprobs = field<bool>(body, "logprobs", false, "a boolean");
    job.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, 0, 20));
    if (job.top_logprobs > 0 && !job.logprobs)
      reject("top_logprobs needs logprobs: true", "top_logprobs");
  } else {
    // the legacy shape: logprobs is the number of top alternatives (null: none)
    if (body.contains("logprobs") && !body["logprobs"].is_null()) {
      job.logprobs = true;
      job.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, 0, 20));
    }
    job.echo = field<bool>(body, "echo", false, "a boolean");
    if ((job.logprobs || job.echo) && field<bool>(body, "stream", false, "a boolean"))
      reject("logprobs and echo on /v1/completions come in whole responses (stream: false)",
             job.echo ? "echo" : "logprobs");
  }
  job.chat = chat;
  if (chat) {
    const json messages = template_messages(body.value("messages", json()));
    json tools = body.value("tools", json());
    if (!tools.is_null() && !tools.is_array()) reject("tools must be a list", "tools");
    const json choice = body.value("tool_choice", json());
    const bool tools_off = choice.is_string() && choice.get<std::string>() == "none";
    json kwargs = body.value("chat_template_kwargs", json::object());
    if (!kwargs.is_object())
      reject("chat_template_kwargs must be an object", "chat_template_kwargs");
    std::string text;
    try {
      text = chat_formatter.render(messages, tools_off ? json() : tools, kwargs);
    } catch (const Error& e) {
      reject(std::string("the chat template failed on these messages: ") + e.what(), "messages");
    }
    job.prompt = tokenizer.encode(text, /*add_special_tokens=*/false);
    const size_t end = text.find_last_not_of(" \t\r\n");
    job.parse.starts_in_reasoning =
        end != std::string::npos && end >= 6 && text.compare(end - 6, 7, "<think>") == 0;
    job.parse.parse_tool_calls = tools.is_array() && !tools.empty() && !tools_off;
  } else {
    // a string, or token ids as they are (parse_requests splits a list of prompts)
    const json prompt = body.value("prompt", json());
    if (prompt.is_string()) {
      job.prompt_text = prompt.get<std::string>();
      job.prompt = tokenizer.encode(job.prompt_text, /*add_special_tokens=*/true);
    } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) {
      for (const json& t : prompt) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
            t.get<int64_t>() >= tokenizer.vocab_size())
          reject(cat("a prompt of token ids needs ids in [0, ", tokenizer.vocab_size(), ")"),
                 "prompt");
        job.prompt.push_back(t.get<int32_t>());
      }
      job.prompt_text = tokenizer.decode(job.prompt, /*skip_special_tokens=*/true);
    } else {
      reject("prompt must be a string, a list of token ids, or a list of those", "prompt");
    }
    job.parse.parse_reasoning = false;
    job.parse.parse_tool_calls = false;
  }
  const int64_t prompt_len = static_cast<int64_t>(job.prompt.size());
  if (prompt_len == 0) reject("the prompt is empty", chat ? "messages" : "prompt");
  if (prompt_len >= max_seq_len)
    reject(cat("This model's maximum context length is ", max_seq_len, " tokens; the prompt has ",
               prompt_len, " tokens (and needs room for at least one more)"),
           chat ? "messages" : "prompt", 400, "invalid_request_error", "context_length_exceeded");
  const int64_t room = max_seq_len - prompt_len;
  int64_t max_tokens = integer(body, "max_tokens", room, 0, 1 << 30);
  max_tokens = integer(body, "max_completion_tokens", max_tokens, 0, 1 << 30);
  if (max_tokens > room)
    reject(cat("max_tokens (", max_tokens, ") plus the prompt (", prompt_len,
               " tokens) exceed the context of ", max_seq_len, " tokens"),
           "max_tokens", 400, "invalid_request_error", "context_length_exceeded");
  SamplingParams& p = job.params;
  p.max_new_tokens = static_cast<int>(max_tokens);
  p.temperature = static_cast<float>(number(body, "temperature", 1.0, 0, 2));
  p.top_p = static_cast<float>(number(body, "top_p", 1.0, 1e-9, 1));
  p.top_k = static_cast<int>(integer(body, "top_k", 0, 0, 1 << 30));
  // without a seed each request draws its own, as OpenAI's and vLLM's servers do: a fixed
  // default made every "regenerate" give the same answer. With one, the answer is a function of
  // (prompt, parameters, seed), whatever runs beside it.
  const bool seeded = body.contains("seed") && !body["seed"].is_null();
  p.seed =
      seeded ? static_cast<uint64_t>(integer(body, "seed", 0, INT64_MIN, INT64_MAX)) : fresh_seed();
  // ignore_eos (vLLM's extension, for benchmarks): run to max_tokens whatever the model says
  if (tokenizer.eos_id() >= 0 && !field<bool>(body, "ignore_eos", false, "a boolean"))
    p.stop_ids = {tokenizer.eos_id()};
  sampling_adjustments(body, tokenizer.vocab_size(), p);
  RequestedGrammar grammar = parse_output_grammar(body);
  if (chat) {
    RequestedGrammar calls =
        tool_choice_grammar(body, body.value("tools", json()), chat_formatter.tool_call_format());
    if (calls.grammar.kind != OutputGrammar::Kind::kNone) {
      if (grammar.grammar.kind != OutputGrammar::Kind::kNone)
        reject("tool_choice \"required\" or a named function and " + grammar.param +
                   " cannot both constrain the answer",
               "tool_choice");
      grammar = std::move(calls);
    }
  }
  p.grammar = std::move(grammar.grammar);
  // a prompt that opens the reasoning (R1, V3.1 thinking): the grammar holds for the answer only
  p.grammar.after_reasoning = job.parse.starts_in_reasoning;
  job.grammar_param = std::move(grammar.param);
  job.stop = stop_strings(body);
  job.stream = field<bool>(body, "stream", false, "a boolean");
  const json so = body.value("stream_options", json());
  if (so.is_object()) job.include_usage = field<bool>(so, "include_usage", false, "a boolean");
  return job;
}

std::vector<Job> parse_requests(const json& body, bool chat, const ChatFormatter& chat_formatter,
                                const std::string& served_model_name, int64_t max_seq_len) {
  const json prompt = chat || !body.is_object() ? json() : body.value("prompt", json());
  // a list of prompts: strings or lists of token ids (not a list of ids: that is one prompt)
  const bool several =
      prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
  if (!several) return {parse_request(body, chat, chat_formatter, served_model_name, max_seq_len)};
  constexpr size_t kMaxPrompts = 64;
  if (prompt.size() > kMaxPrompts)
    reject(cat("prompt lists at most ", kMaxPrompts, " prompts"), "prompt");
  std::vector<Job> jobs;
  json one = body;
  for (const json& p : prompt) {
    if (!p.is_string() && !p.is_array())
      reject("prompt must be a string, a list of token ids, or a list of those", "prompt");
    one["prompt"] = p;
    jobs.push_back(parse_request(one, chat, chat_formatter, served_model_name, max_seq_len));
  }
  return jobs;
}

std::vector<int32_t> tokenize_request(const json& body, const ChatFormatter& chat_formatter) {
  const Tokenizer& tokenizer = chat_formatter.tokenizer();
  if (body.contains("messages")) {
    const json kwargs = body.value("chat_template_kwargs", json::object());
    if (!kwargs.is_object())
      reject("chat_template_kwargs must be an object", "chat_template_kwargs");
    std::string text;
    try {
      text = chat_formatter.render(template_messages(body["messages"]), body.value("tools", json()),
                                   kwargs);
    } catch (const Error& e) {
      reject(std::string("the chat template failed on these messages: ") + e.what(), "messages");
    }
    return tokenizer.encode(text, /*add_special_tokens=*/false);
  }
  if (!body.contains("prompt") || !body["prompt"].is_string())
    reject("give prompt (a string) or messages", "prompt");
  return tokenizer.encode(body["prompt"].get<std::string>(),
                          field<bool>(body, "add_special_tokens", true, "a boolean"));
}

}  // namespace dsinfer
