// Model configs in both forms (the reference's ModelArgs JSON and HF config.json): one that
// parses has passed validate(), so its derived numbers must be finite and its summary printable.
#include <cmath>

#include "core/error.h"
#include "fuzz_support.h"
#include "model/config.h"

using namespace dsinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ModelConfig c;
  try {
    c = parse_config_json(std::string(fuzz::as_text(data, size)), "config.json");
  } catch (const Error&) {
    return 0;
  }
  if (!std::isfinite(c.rope_theta) || !std::isfinite(c.route_scale) || !std::isfinite(c.mscale))
    fuzz::finding("a validated config holds a non-finite number");
  if (c.dim <= 0 || c.n_layers <= 0 || c.vocab_size <= 0)
    fuzz::finding("a validated config has a non-positive size");
  (void)c.summary();
  return 0;
}
