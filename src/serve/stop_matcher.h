// OpenAI `stop` strings over a stream of text: push() returns what may be shown now; text that
// may be the start of a stop string is held back until it is decided, so a stop string is never
// emitted, not even in part. After a match, nothing more is emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // The text that is decided: before a match, or free of any stop string's beginning.
  std::string push(std::string_view text);
  // The end of the completion: what was held back.
  std::string finish();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool matched_ = false;
};

}  // namespace dsinfer
