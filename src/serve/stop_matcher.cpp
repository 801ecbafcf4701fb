#include "serve/stop_matcher.h"

#include <algorithm>

#include "core/utf8.h"

namespace dsinfer {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  pending_.append(text);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // hold back the longest tail that begins some stop string, and never split a character
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(pending_.size(), s.size() - 1); n > keep; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  const size_t emit =
      utf8_complete_prefix(std::string_view(pending_).substr(0, pending_.size() - keep));
  std::string out = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

std::string StopMatcher::finish() {
  if (matched_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace dsinfer
