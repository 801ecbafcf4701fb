#include "core/json_source.h"

#include <nlohmann/json.hpp>

namespace dsinfer {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : t_(text) {}
  void skip_space() {
    while (at_ < t_.size() &&
           (t_[at_] == ' ' || t_[at_] == '\t' || t_[at_] == '\n' || t_[at_] == '\r'))
      ++at_;
  }
  bool peek(char c) {
    skip_space();
    return at_ < t_.size() && t_[at_] == c;
  }
  bool take(char c) {
    if (!peek(c)) return false;
    ++at_;
    return true;
  }
  // A string token (quotes included); the position moves past it.
  std::string_view string_token() {
    const size_t start = at_++;
    while (at_ < t_.size() && t_[at_] != '"') at_ += t_[at_] == '\\' ? 2 : 1;
    at_ = std::min(at_ + 1, t_.size());
    return t_.substr(start, at_ - start);
  }
  // One whole value (objects and arrays by counting brackets outside strings).
  std::string_view value() {
    skip_space();
    const size_t start = at_;
    if (at_ >= t_.size()) return {};
    if (t_[at_] == '"') return string_token();
    if (t_[at_] == '{' || t_[at_] == '[') {
      int64_t depth = 0;
      while (at_ < t_.size()) {
        const char c = t_[at_];
        if (c == '"') {
          string_token();
          continue;
        }
        ++at_;
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) break;
      }
      return t_.substr(start, at_ - start);
    }
    while (at_ < t_.size() && t_[at_] != ',' && t_[at_] != '}' && t_[at_] != ']' &&
           t_[at_] != ' ' && t_[at_] != '\n' && t_[at_] != '\r' && t_[at_] != '\t')
      ++at_;
    return t_.substr(start, at_ - start);
  }
  // In an object: the value of `key` (the last one of that name), nullopt if none.
  std::optional<std::string_view> member(const std::string& key) {
    std::optional<std::string_view> found;
    if (!take('{')) return std::nullopt;
    while (peek('"')) {
      const std::string_view name = string_token();
      if (!take(':')) return std::nullopt;
      const std::string_view v = value();
      if (same_key(name, key)) found = v;
      if (!take(',')) break;
    }
    return found;
  }

 private:
  static bool same_key(std::string_view token, const std::string& key) {
    const std::string_view plain = token.substr(1, token.size() - 2);
    if (plain.find('\\') == std::string_view::npos) return plain == key;
    const nlohmann::json decoded = nlohmann::json::parse(token, nullptr, false);
    return decoded.is_string() && decoded.get<std::string>() == key;
  }
  std::string_view t_;
  size_t at_ = 0;
};

}  // namespace

std::optional<std::string_view> json_source_at(std::string_view document,
                                               const std::vector<std::string>& path) {
  std::string_view here = document;
  for (const std::string& key : path) {
    Scanner s(here);
    const std::optional<std::string_view> v = s.member(key);
    if (!v) return std::nullopt;
    here = *v;
  }
  return here;
}

}  // namespace dsinfer
