// A request's tokens turned into OpenAI output, on its HTTP thread: Output detokenizes, holds
// back stop strings and splits reasoning and tool calls; pump_tokens is the one loop both the
// whole and the streamed response run over a request's Channel.
#pragma once

#include <cstdint>
#include <functional>

#include "chat/deepseek_output.h"
#include "serve/request.h"
#include "serve/stop_matcher.h"
#include "serve/token_channel.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer {

class Output {
 public:
  Output(const Tokenizer& tokenizer, const Job& job);
  // The deltas of the next token, and whether the stop strings ended the text.
  OutputDelta push(int32_t token) {
    const bool reasoning = parser_.in_reasoning();
    OutputDelta delta = route(stop_.push(decoder_.push(token)));
    // a token that continues or closes the reasoning counts as a reasoning token, and so do
    // those of its opener (<think> may come in several tokens, held while undecided)
    if (reasoning || parser_.in_reasoning()) {
      reasoning_tokens_ += 1 + (reasoning ? 0 : undecided_tokens_);
      undecided_tokens_ = 0;
    } else if (parser_.undecided()) {
      ++undecided_tokens_;
    }
    return delta;
  }
  OutputDelta finish();
  bool stopped() const { return stop_.matched(); }
  bool made_tool_calls() const { return parser_.made_tool_calls(); }
  // Tokens pushed while the reasoning was open (usage.completion_tokens_details).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

  static void append(OutputDelta& a, const OutputDelta& b);

 private:
  OutputDelta route(const std::string& text);
  StreamDecoder decoder_;
  StopMatcher stop_;
  DeepSeekOutputParser parser_;
  bool chat_;
  int64_t reasoning_tokens_ = 0;
  int64_t undecided_tokens_ = 0;  // pushed before the parser knew whether <think> opens
};

// Where pump_tokens delivers a request's output.
struct OutputSink {
  double wait_seconds = -1;  // how long one wait for tokens lasts (< 0: until some come)
  // After every wait (timed_out: nothing came): false when the client has gone away.
  std::function<bool(bool timed_out)> client_there;
  // The text of the next token and its log-probability (null when not asked for): false when the
  // client has gone away.
  std::function<bool(const OutputDelta& delta, const TokenLogprob* logprob)> deliver;
};

struct PumpResult {
  int64_t completion_tokens = 0;  // the tokens the answer holds (up to a stop string)
  bool client_gone = false;
};

// Feeds the request's tokens through `output` to `sink` until the engine ends the request;
// calls `cancel` (once) when a stop string ends the text or the client goes away. After a stop
// string it still waits for the end (the finish reason and usage come with it); when the client
// has gone it returns at once, so the request's slot is free before the engine's next step
// drops the sequence (a busy engine's step can take seconds). Tokens after a stop are not
// delivered.
PumpResult pump_tokens(Channel& ch, Output& output, const std::function<void()>& cancel,
                       const OutputSink& sink);

}  // namespace dsinfer
