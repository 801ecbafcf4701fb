#include "io/json_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace dsinfer {

nlohmann::json parse_json(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(origin, " is not valid JSON (", e.what(), ")");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  check(in.good(), "cannot read ", what, " ", path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

}  // namespace dsinfer
