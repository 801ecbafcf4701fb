#include "commands.h"
#include "core/error.h"

namespace dsinfer::cli {

Command register_fp8_cast_bf16(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("fp8-cast-bf16", "dequantize an fp8 Hugging Face checkpoint to bf16");
  return {sub, [] { fail("fp8-cast-bf16: not implemented yet"); }};
}

}  // namespace dsinfer::cli
