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
