#include "commands.h"
#include "core/error.h"

namespace dsinfer::cli {

Command register_convert(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("convert", "cut a Hugging Face checkpoint into model{rank}-mp{N}.safetensors shards");
  return {sub, [] { fail("convert: not implemented yet"); }};
}

}  // namespace dsinfer::cli
