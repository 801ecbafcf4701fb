// DeepSeek-V3's own tokenizer on arbitrary text. Byte-level BPE with no normalizer loses nothing:
// decoding what valid UTF-8 encodes to gives the text back, byte for byte.
#include <string>

#include "core/error.h"
#include "core/utf8.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

using namespace dsinfer;

namespace {
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t maximal = 0;
    bool truncated = false;
    const size_t n = utf8_sequence(s, i, &maximal, &truncated);
    if (n == 0) return false;
    i += n;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer t = Tokenizer::from_strings(
      fuzz::read_data_file("tokenizer/deepseek-v3/tokenizer.json"),
      fuzz::read_data_file("tokenizer/deepseek-v3/tokenizer_config.json"), "deepseek-v3");
  const std::string_view text = fuzz::as_text(data, size);
  const std::vector<int32_t> ids = t.encode(text, /*add_special_tokens=*/false);
  const std::string back = t.decode(ids, /*skip_special_tokens=*/false);
  if (valid_utf8(text) && back != text) fuzz::finding("decode(encode(text)) != text");
  return 0;
}
