// Golden case files (eval: prefill/decode/generate; perplexity: token lists). First byte picks
// which; the rest is the file. A case that parses holds token ids a 32-bit int can carry.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/eval_case.h"
#include "engine/perplexity.h"
#include "fuzz_support.h"
#include "io/json_file.h"

using namespace dsinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    const nlohmann::json j =
        parse_json(std::string(fuzz::as_text(data + 1, size - 1)), "case.json");
    if (data[0] & 1) {
      for (const auto& row : parse_perplexity_case(j, "case.json"))
        for (int32_t id : row)
          if (id < 0) fuzz::finding("a negative token id");
    } else {
      const EvalCase c = parse_eval_case(j, "case.json");
      for (const auto& row : c.decode)
        if (row.size() != c.prefill.size()) fuzz::finding("a decode row of another batch size");
      if (c.max_new_tokens < 0) fuzz::finding("negative max_new_tokens");
    }
  } catch (const Error&) {
  }
  return 0;
}
