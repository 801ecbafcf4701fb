#include "io/json_file.h"

#include "core/error.h"
#include "core/read_file.h"

namespace dsinfer {

namespace {
constexpr int64_t kMaxJsonFileBytes = int64_t{1} << 30;  // eval cases with logits run to MBs
}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(origin, " is not valid JSON (", e.what(), ")");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  // (read_input_file: a FIFO nobody writes blocked `eval --case` in open() for ever)
  return parse_json(read_input_file(path, what, kMaxJsonFileBytes), path);
}

}  // namespace dsinfer
