// DeepSeek's output, split the way OpenAI-style clients expect (docs/SERVING.md): R1 / V3.1
// reasoning
// (`<think>...</think>`) to `reasoning_content`, the rest to `content`, and V3 / R1-0528 / V3.1
// tool calls
// (`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`) to
// `tool_calls`. Streaming, with state per request: text is pushed as it is decoded and comes back
// as deltas; a piece that may be the start of a marker is held back until it is decided, so no
// marker is ever emitted in part. Tool calls are emitted when their section ends (or at finish),
// and only when every call in it parses: a malformed section stays in `content`, never an empty
// `tool_calls` list. The server knows whether the prompt ended inside `<think>` (it rendered the
// template), so that is an option, not a guess.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer {

// The markers as the checkpoints write them (the parser also takes misspellings of the opener).
inline constexpr std::string_view kThinkClose = "</think>";
inline constexpr std::string_view kToolCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kToolCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kToolCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kToolCallEnd = "<｜tool▁call▁end｜>";

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as compact text
};

struct OutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;  // whole calls, in order (indices continue across deltas)
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct OutputParserOptions {
  bool starts_in_reasoning = false;  // the prompt ended with `<think>` (R1; V3.1 with thinking)
  bool parse_reasoning = true;       // an explicit `<think>` at the start opens reasoning
  bool parse_tool_calls = true;      // the request gave tools
};

class DeepSeekOutputParser {
 public:
  explicit DeepSeekOutputParser(OutputParserOptions options = {});
  // The next decoded text of the completion (whole characters, special markers as text).
  OutputDelta push(std::string_view text);
  // The completion ended: everything held back, decided as it stands.
  OutputDelta finish();
  // Whether any tool call was emitted (the finish reason is then "tool_calls").
  bool made_tool_calls() const { return made_tool_calls_; }
  // Whether the text so far ends inside the reasoning (after <think>, before </think>).
  bool in_reasoning() const { return state_ == State::kReasoning; }
  // Whether nothing is decided yet (the text so far may still be the start of a <think>).
  bool undecided() const { return state_ == State::kStart; }

 private:
  enum class State { kStart, kReasoning, kContent, kToolCalls };
  void run(OutputDelta& out, bool final);
  void close_tool_section(OutputDelta& out, const std::string& section_text, bool complete);

  OutputParserOptions options_;
  State state_;
  std::string pending_;  // text not yet emitted
  std::string opener_;   // the tool section's opener as the model wrote it
  bool made_tool_calls_ = false;
};

// Parses one call's text between `<｜tool▁call▁begin｜>` and `<｜tool▁call▁end｜>` in the V3 form
// (`function<｜tool▁sep｜>NAME\n```json\nARGS\n````) or the V3.1 form (`NAME<｜tool▁sep｜>ARGS`);
// false when it is neither or ARGS is not a JSON object.
bool parse_tool_call(std::string_view text, ToolCall& call);

}  // namespace dsinfer
