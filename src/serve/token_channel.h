// What the engine thread tells one request's HTTP thread: its tokens as they are sampled (with
// their log-probabilities when the request asked), and how it ended.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace dsinfer {

// The log-probability of a sampled token under the model (before temperature), and the most
// likely alternatives at its position.
struct TokenLogprob {
  int32_t token;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;
};

// From the logits row [vocab] the token was drawn from: its log-softmax and the `top` best.
TokenLogprob token_logprob(const float* row, int64_t vocab, int32_t token, int top);

struct Channel {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<int32_t> tokens;
  std::deque<TokenLogprob> logprobs;  // one per token when the request asked for them
  // echo with logprobs: the prompt's tokens 1 .. each from the row before it (filled before the
  // first token)
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kStop;
  std::string error;
  int64_t reused = 0;  // prompt tokens that came from the prefix cache
  // a stop string ended the text (the HTTP side cancels the request, which then finishes
  // normally: /metrics counts it finished, not cancelled)
  bool stopped_by_text = false;

  // Waits up to timeout_s (forever when < 0) for tokens or the end, and moves what came into
  // `got` and `logprobs` (replacing their contents). False when the time passed with neither.
  // `finished`: the request ended and every token has been taken.
  bool next(std::vector<int32_t>& got, std::vector<TokenLogprob>& logprobs, bool& finished,
            double timeout_s);
};

}  // namespace dsinfer
