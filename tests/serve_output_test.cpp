// The serve side's token output (src/serve/output.h) on the DeepSeek-V3 tokenizer: the tokens that
// open, continue and close the reasoning count as reasoning tokens
// (usage.completion_tokens_details.reasoning_tokens), the answer's do not, and a completion that
// starts inside <think> (a template that opens it) counts from its first token. pump_tokens
// leaves at once when the client has gone (its slot frees before the engine's next step) and
// waits for the end after a stop string.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "serve/output.h"
#include "test_support.h"

namespace dsinfer::serve_output_test {
namespace {

const Tokenizer& v3() {
  static const Tokenizer t = Tokenizer::load(test::data_path("tokenizer/deepseek-v3"));
  return t;
}

// Pushes the tokens of `text` one by one; the reasoning and content that came out.
OutputDelta push_all(Output& out, const std::string& text) {
  OutputDelta all;
  for (int32_t id : v3().encode(text, /*add_special_tokens=*/false))
    Output::append(all, out.push(id));
  Output::append(all, out.finish());
  return all;
}

TEST(ServeOutput, ReasoningTokensAreThoseFromThinkToItsEnd) {
  Job job;
  const std::vector<int32_t> thinking = v3().encode("<think>one two three</think>", false);
  Output out(v3(), job);
  const OutputDelta all = push_all(out, "<think>one two three</think>The answer is four.");
  EXPECT_EQ(all.reasoning, "one two three");
  EXPECT_EQ(all.content, "The answer is four.");
  EXPECT_EQ(out.reasoning_tokens(), static_cast<int64_t>(thinking.size()));
  // no reasoning: none counted
  Output plain(v3(), job);
  push_all(plain, "The answer is four.");
  EXPECT_EQ(plain.reasoning_tokens(), 0);
  // a template that opened <think>: the completion is reasoning until </think>
  job.parse.starts_in_reasoning = true;
  Output opened(v3(), job);
  const OutputDelta r = push_all(opened, "one two three</think>The answer is four.");
  EXPECT_EQ(r.reasoning, "one two three");
  EXPECT_EQ(opened.reasoning_tokens(),
            static_cast<int64_t>(v3().encode("one two three</think>", false).size()));
}

// A sink whose client is there until `gone` is set, collecting what it is given.
struct TestSink {
  std::atomic<bool> gone{false};
  std::string content;
  OutputSink sink() {
    OutputSink s;
    s.wait_seconds = 0.01;
    s.client_there = [this](bool) { return !gone.load(); };
    s.deliver = [this](const OutputDelta& d, const TokenLogprob*) {
      content += d.content;
      return true;
    };
    return s;
  }
};

void push_tokens(Channel& ch, const std::vector<int32_t>& ids, bool finish) {
  std::lock_guard<std::mutex> lock(ch.mutex);
  ch.tokens.insert(ch.tokens.end(), ids.begin(), ids.end());
  ch.finished = finish;
  ch.ready.notify_all();
}

TEST(ServeOutput, AGoneClientIsCancelledAndLeftWithoutWaitingForTheEnd) {
  Job job;
  Channel ch;
  push_tokens(ch, v3().encode("Once upon", false), /*finish=*/false);
  Output out(v3(), job);
  TestSink test_sink;
  int cancels = 0;
  std::atomic<bool> returned{false};
  std::thread leave([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    test_sink.gone = true;
    // the engine would end it at its next step; here only after 5 s, and only if still waited on
    for (int i = 0; i < 500 && !returned; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!returned) push_tokens(ch, {}, /*finish=*/true);
  });
  const PumpResult r = pump_tokens(
      ch, out, [&] { ++cancels; }, test_sink.sink());
  returned = true;
  leave.join();
  EXPECT_TRUE(r.client_gone);
  EXPECT_EQ(cancels, 1);
  EXPECT_FALSE(ch.finished) << "waited for the end after the client had gone";
}

TEST(ServeOutput, AStopStringCancelsAndStillWaitsForTheEnd) {
  Job job;
  job.stop = {"upon"};
  Channel ch;
  push_tokens(ch, v3().encode("Once upon a time", false), /*finish=*/false);
  Output out(v3(), job);
  TestSink test_sink;
  int cancels = 0;
  std::atomic<bool> ended{false};
  std::thread engine([&] {  // the engine takes the cancel at its next step
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ended = true;
    push_tokens(ch, {}, /*finish=*/true);
  });
  const PumpResult r = pump_tokens(
      ch, out, [&] { ++cancels; }, test_sink.sink());
  engine.join();
  EXPECT_TRUE(ended) << "returned before the request ended";
  EXPECT_FALSE(r.client_gone);
  EXPECT_EQ(cancels, 1);
  EXPECT_TRUE(ch.stopped_by_text);
}

}  // namespace
}  // namespace dsinfer::serve_output_test
