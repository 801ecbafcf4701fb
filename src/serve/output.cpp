#include "serve/output.h"

#include <vector>

namespace dsinfer {

Output::Output(const Tokenizer& tokenizer, const Job& job)
    : decoder_(tokenizer, /*skip_special_tokens=*/true),
      stop_(job.stop),
      parser_(job.parse),
      chat_(job.chat) {}

OutputDelta Output::finish() {
  OutputDelta d = route(stop_.push(decoder_.finish()));
  append(d, route(stop_.finish()));
  if (chat_) append(d, parser_.finish());
  return d;
}

void Output::append(OutputDelta& a, const OutputDelta& b) {
  a.reasoning += b.reasoning;
  a.content += b.content;
  for (const ToolCall& c : b.tool_calls) a.tool_calls.push_back(c);
}

OutputDelta Output::route(const std::string& text) {
  if (chat_) return parser_.push(text);
  OutputDelta d;
  d.content = text;
  return d;
}

PumpResult pump_tokens(Channel& ch, Output& output, const std::function<void()>& cancel,
                       const OutputSink& sink) {
  PumpResult result;
  bool cancelled = false;
  auto cancel_once = [&] {
    if (!cancelled) cancel();
    cancelled = true;
  };
  std::vector<int32_t> got;
  std::vector<TokenLogprob> lps;
  for (;;) {
    bool finished = false;
    const bool woke = ch.next(got, lps, finished, sink.wait_seconds);
    if (finished) break;
    if (!result.client_gone && !sink.client_there(!woke)) {
      result.client_gone = true;
      cancel_once();
    }
    for (size_t i = 0; i < got.size() && !result.client_gone && !output.stopped(); ++i) {
      ++result.completion_tokens;
      if (!sink.deliver(output.push(got[i]), i < lps.size() ? &lps[i] : nullptr))
        result.client_gone = true;
      if (output.stopped() && !result.client_gone) {
        std::lock_guard<std::mutex> lock(ch.mutex);
        ch.stopped_by_text = true;
      }
      if (output.stopped() || result.client_gone)
        cancel_once();  // a stop string, or the client went away
    }
    if (result.client_gone) break;  // (nobody waits for the end; the engine drops it)
  }
  return result;
}

}  // namespace dsinfer
