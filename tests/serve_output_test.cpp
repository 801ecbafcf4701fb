// The serve side's token output (src/serve/output.h) on the DeepSeek-V3 tokenizer: the tokens that
// open, continue and close the reasoning count as reasoning tokens
// (usage.completion_tokens_details.reasoning_tokens), the answer's do not, and a completion that
// starts inside <think> (a template that opens it) counts from its first token.
#include <gtest/gtest.h>

#include "serve/output.h"
#include "test_support.h"

namespace dsinfer {
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

}  // namespace
}  // namespace dsinfer
