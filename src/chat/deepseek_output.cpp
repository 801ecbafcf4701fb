#include "chat/deepseek_output.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace dsinfer {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kCallsEnd = kToolCallsEnd;
constexpr std::string_view kCallBegin = kToolCallBegin;
constexpr std::string_view kCallEnd = kToolCallEnd;
constexpr std::string_view kSep = "<｜tool▁sep｜>";
// The opener as the checkpoints write it, and as distilled models misspell it (llama.cpp accepts
// the same variants).
constexpr std::string_view kCallsBegin[] = {kToolCallsBegin, "<｜tool_calls_begin｜>",
                                            "<｜tool calls begin｜>", "<｜tool\\_calls\\_begin｜>",
                                            "<｜tool▁calls｜>"};

// The first occurrence of any marker in `text`: its position and length (npos when none).
std::pair<size_t, size_t> find_first(std::string_view text,
                                     std::initializer_list<std::string_view> markers) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view m : markers) {
    const size_t at = text.find(m);
    if (at < best.first) best = {at, m.size()};
  }
  return best;
}

// How many bytes at the end of `text` could be the start of one of `markers` (held back).
size_t partial_suffix(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t keep = 0;
  for (std::string_view m : markers)
    for (size_t n = std::min(text.size(), m.size() - 1); n > keep; --n)
      if (text.substr(text.size() - n) == m.substr(0, n)) {
        keep = n;
        break;
      }
  return keep;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

bool parse_tool_call(std::string_view text, ToolCall& call) {
  const size_t sep = text.find(kSep);
  if (sep == std::string_view::npos) return false;
  std::string_view head = trim(text.substr(0, sep)), rest = text.substr(sep + kSep.size());
  std::string_view name, args;
  const size_t fence = rest.find("```json");
  if (fence != std::string_view::npos) {  // V3: function<sep>NAME\n```json\nARGS\n```
    if (head != "function") return false;
    name = trim(rest.substr(0, fence));
    std::string_view body = rest.substr(fence + 7);
    const size_t close = body.rfind("```");
    if (close == std::string_view::npos || !trim(body.substr(close + 3)).empty()) return false;
    args = trim(body.substr(0, close));
  } else {  // V3.1: NAME<sep>ARGS
    name = head;
    args = trim(rest);
  }
  if (name.empty() || name.find_first_of(" \t\r\n") != std::string_view::npos) return false;
  nlohmann::json parsed =
      nlohmann::json::parse(args.begin(), args.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return false;
  call.name = std::string(name);
  call.arguments = parsed.dump();
  return true;
}

DeepSeekOutputParser::DeepSeekOutputParser(OutputParserOptions options)
    : options_(options), state_(options.starts_in_reasoning ? State::kReasoning : State::kStart) {}

OutputDelta DeepSeekOutputParser::push(std::string_view text) {
  pending_.append(text);
  OutputDelta out;
  run(out, /*final=*/false);
  return out;
}

OutputDelta DeepSeekOutputParser::finish() {
  OutputDelta out;
  run(out, /*final=*/true);
  return out;
}

void DeepSeekOutputParser::close_tool_section(OutputDelta& out, const std::string& section,
                                              bool complete) {
  // section: everything after the opener, up to (not including) the closer
  std::vector<ToolCall> calls;
  bool ok = complete;
  std::string_view rest = section;
  while (ok && !trim(rest).empty()) {
    rest = rest.substr(rest.find_first_not_of(" \t\r\n"));
    if (rest.substr(0, kCallBegin.size()) != kCallBegin) {
      ok = false;
      break;
    }
    rest = rest.substr(kCallBegin.size());
    const size_t end = rest.find(kCallEnd);
    ToolCall call;
    if (end == std::string_view::npos || !parse_tool_call(rest.substr(0, end), call)) {
      ok = false;
      break;
    }
    calls.push_back(std::move(call));
    rest = rest.substr(end + kCallEnd.size());
  }
  if (ok && !calls.empty()) {
    for (ToolCall& c : calls) out.tool_calls.push_back(std::move(c));
    made_tool_calls_ = true;
  } else {
    out.content += opener_ + section + (complete ? std::string(kCallsEnd) : "");
  }
}

void DeepSeekOutputParser::run(OutputDelta& out, bool final) {
  for (;;) {
    std::string_view text = pending_;
    switch (state_) {
      case State::kStart: {
        // an explicit <think> opens reasoning only as the first thing the model writes
        const std::string_view lead = text.substr(0, text.find_first_not_of(" \t\r\n"));
        const std::string_view body = text.substr(lead.size());
        if (options_.parse_reasoning && body.substr(0, kThinkOpen.size()) == kThinkOpen) {
          pending_.erase(0, lead.size() + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && options_.parse_reasoning && body.size() < kThinkOpen.size() &&
            kThinkOpen.substr(0, body.size()) == body)
          return;  // still could be <think>
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t at = text.find(kThinkClose);
        if (at != std::string_view::npos) {
          out.reasoning.append(text.substr(0, at));
          pending_.erase(0, at + kThinkClose.size());
          state_ = State::kContent;
          continue;
        }
        const size_t keep = final ? 0 : partial_suffix(text, {kThinkClose});
        out.reasoning.append(text.substr(0, text.size() - keep));
        pending_.erase(0, text.size() - keep);
        return;
      }
      case State::kContent: {
        if (options_.parse_tool_calls) {
          const auto [at, len] = find_first(text, {kCallsBegin[0], kCallsBegin[1], kCallsBegin[2],
                                                   kCallsBegin[3], kCallsBegin[4]});
          if (at != std::string_view::npos) {
            out.content.append(text.substr(0, at));
            opener_ = std::string(text.substr(at, len));
            pending_.erase(0, at + len);
            state_ = State::kToolCalls;
            continue;
          }
        }
        const size_t keep =
            final || !options_.parse_tool_calls
                ? 0
                : partial_suffix(text, {kCallsBegin[0], kCallsBegin[1], kCallsBegin[2],
                                        kCallsBegin[3], kCallsBegin[4]});
        out.content.append(text.substr(0, text.size() - keep));
        pending_.erase(0, text.size() - keep);
        return;
      }
      case State::kToolCalls: {
        const size_t at = text.find(kCallsEnd);
        if (at != std::string_view::npos) {
          const std::string section(text.substr(0, at));
          pending_.erase(0, at + kCallsEnd.size());
          close_tool_section(out, section, /*complete=*/true);
          state_ = State::kContent;
          continue;
        }
        if (!final) return;  // wait for the section to end
        const std::string section = pending_;
        pending_.clear();
        close_tool_section(out, section, /*complete=*/false);
        return;
      }
    }
  }
}

}  // namespace dsinfer
