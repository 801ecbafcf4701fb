// The JSON of OpenAI responses: errors, logprobs, usage, finish reasons, tool calls.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/deepseek_output.h"
#include "serve/request.h"
#include "serve/token_channel.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer {

// {"error": {"message", "type", "param", "code"}}
std::string error_body(const ApiError& e);
// OpenAI's logprobs.content: per token its text, logprob and bytes, with the top alternatives.
nlohmann::json logprobs_json(const Tokenizer& tokenizer, const std::vector<TokenLogprob>& lps);
// usage: prompt, completion and total tokens, the completion's reasoning tokens and the prompt
// tokens the prefix cache held.
nlohmann::json usage_json(int64_t prompt, int64_t reused, int64_t completion, int64_t reasoning);
// The legacy completions logprobs: {"tokens", "token_logprobs", "top_logprobs" (text -> logprob),
// "text_offset"} of `lps` in order; with first_is_unscored the first token (a prompt's first,
// which nothing predicts) has null logprobs.
nlohmann::json legacy_logprobs_json(const Tokenizer& tokenizer,
                                    const std::vector<TokenLogprob>& lps, bool first_is_unscored);
// "tool_calls", "stop" (the model's end or a stop string) or "length".
const char* finish_name(FinishReason r, bool stopped, bool tool_calls);
// calls as OpenAI tool_calls, ids id_prefix + index from first_index (with "index" in a stream).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, int64_t first_index,
                               const std::string& id_prefix, bool with_index);

}  // namespace dsinfer
