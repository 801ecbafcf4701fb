#include <memory>
#include <string>

#include "commands.h"
#include "convert/convert.h"

namespace dsinfer::cli {

Command register_fp8_cast_bf16(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "fp8-cast-bf16",
      "dequantize an fp8 Hugging Face checkpoint to bf16 (the reference's fp8_cast_bf16.py)");
  struct Paths {
    std::string input, output;
  };
  auto paths = std::make_shared<Paths>();
  sub->add_option("--input-fp8-hf-path", paths->input,
                  "fp8 Hugging Face checkpoint directory (with model.safetensors.index.json)")
      ->required();
  sub->add_option("--output-bf16-hf-path", paths->output,
                  "output directory (created if missing) for the bf16 *.safetensors and the index")
      ->required();
  return {sub, [paths] { fp8_cast_bf16(paths->input, paths->output); }};
}

}  // namespace dsinfer::cli
