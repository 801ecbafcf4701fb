#include "serve/responses.h"

#include <optional>
#include <string_view>

namespace dsinfer {

using json = nlohmann::json;

std::string error_body(const ApiError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}}
      // a message may quote the client's bytes (a parse error's excerpt), which need not be
      // UTF-8: replaced, so the error is still answered
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

json logprob_entry(const Tokenizer& tokenizer, int32_t token, float logprob) {
  const std::optional<std::string_view> raw = tokenizer.token_bytes(token);
  const std::string bytes = raw ? std::string(*raw) : std::string();
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(c);
  return {{"token", tokenizer.decode({token}, /*skip_special_tokens=*/false)},
          {"logprob", logprob},
          {"bytes", b}};
}

}  // namespace

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

json usage_json(int64_t prompt, int64_t reused, int64_t completion, int64_t reasoning) {
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"completion_tokens_details", {{"reasoning_tokens", reasoning}}},
              {"prompt_tokens_details", {{"cached_tokens", reused}}},
              {"prompt_cache_hit_tokens", reused},
              {"prompt_cache_miss_tokens", prompt - reused}};
}

json legacy_logprobs_json(const Tokenizer& tokenizer, const std::vector<TokenLogprob>& lps,
                          bool first_is_unscored) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < lps.size(); ++i) {
    const TokenLogprob& lp = lps[i];
    tokens.push_back(tokenizer.decode({lp.token}, /*skip_special_tokens=*/false));
    // offsets into the answer's text, where special tokens (a prompt's BOS) take no room
    text_offset.push_back(offset);
    offset +=
        static_cast<int64_t>(tokenizer.decode({lp.token}, /*skip_special_tokens=*/true).size());
    if (i == 0 && first_is_unscored) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, value] : lp.top)
      top[tokenizer.decode({id}, /*skip_special_tokens=*/false)] = value;
    top_logprobs.push_back(std::move(top));
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", top_logprobs},
              {"text_offset", text_offset}};
}

const char* finish_name(FinishReason r, bool stopped, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  if (stopped) return "stop";
  return r == FinishReason::kLength ? "length" : "stop";
}

json tool_calls_json(const std::vector<ToolCall>& calls, int64_t first_index,
                     const std::string& id_prefix, bool with_index) {
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

}  // namespace dsinfer
