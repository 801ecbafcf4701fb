// Loading a tokenizer from strangers' files and running it: tokenizer.json, NUL,
// tokenizer_config.json, NUL, a text to encode (and decode again).
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

using namespace dsinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [tokenizer_json, rest] = fuzz::split_at_nul(fuzz::as_text(data, size));
  const auto [config_json, text] = fuzz::split_at_nul(rest);
  try {
    const Tokenizer t =
        Tokenizer::from_strings(std::string(tokenizer_json), std::string(config_json), "fuzz");
    const std::vector<int32_t> ids = t.encode(text, /*add_special_tokens=*/true);
    (void)t.decode(ids, /*skip_special_tokens=*/false);
    (void)t.decode(ids, /*skip_special_tokens=*/true);
  } catch (const Error&) {
  }
  return 0;
}
