#include "core/json_excerpt.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsinfer {

namespace {

std::string cut(std::string s, size_t max_chars) {
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

// A scalar as JSON, anything else by its kind only (no descent).
std::string shallow(const nlohmann::json& v, size_t max_chars) {
  if (v.is_array()) return "[...]";
  if (v.is_object()) return "{...}";
  return cut(v.dump(), max_chars);
}

}  // namespace

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  constexpr size_t kShown = 4;
  if (value.is_array()) {
    std::string s = "[";
    size_t i = 0;
    for (const auto& e : value) {
      if (i == kShown || s.size() > max_chars) {
        s += ", ...";
        break;
      }
      s += (i++ ? ", " : "") + shallow(e, max_chars / 2);
    }
    return s + "] (an array of " + std::to_string(value.size()) + ")";
  }
  if (value.is_object()) {
    std::string s = "an object of " + std::to_string(value.size()) + " keys (";
    size_t i = 0;
    for (const auto& [key, v] : value.items()) {
      if (i == kShown || s.size() > max_chars) {
        s += ", ...";
        break;
      }
      s += (i++ ? ", " : "") + cut(nlohmann::json(key).dump(), max_chars / 2);
    }
    return s + ")";
  }
  return cut(value.dump(), max_chars);
}

int64_t json_integer(const nlohmann::json& value, int64_t lo, int64_t hi, const std::string& what) {
  bool ok = false;
  int64_t v = 0;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(INT64_MAX);
    v = static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    ok = true;
    v = value.get<int64_t>();
  }
  check(ok && v >= lo && v <= hi, what, " must be an integer in [", lo, ", ", hi, "], got ",
        json_excerpt(value));
  return v;
}

}  // namespace dsinfer
