// model.safetensors.index.json: a weight_map that parses names only plain files of the directory.
#include "core/error.h"
#include "fuzz_support.h"
#include "io/checkpoint_dir.h"

using namespace dsinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& [tensor, file] :
         parse_weight_map(std::string(fuzz::as_text(data, size)), "index.json"))
      if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos)
        fuzz::finding("weight_map file " + file + " is not a plain file name");
  } catch (const Error&) {
  }
  return 0;
}
