#include <memory>

#include "commands.h"
#include "convert/convert.h"

namespace dsinfer::cli {

Command register_convert(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("convert",
                         "cut a Hugging Face checkpoint into model{rank}-mp{N}.safetensors shards "
                         "(the reference's convert.py)");
  auto options = std::make_shared<ConvertOptions>();
  sub->add_option("--hf-ckpt-path", options->hf_ckpt_path,
                  "Hugging Face checkpoint directory (*.safetensors, model.safetensors.index.json, "
                  "config.json)")
      ->required();
  sub->add_option("--save-path", options->save_path,
                  "output directory (created if missing) for model{rank}-mp{N}.safetensors, the "
                  "*token* files and config.json")
      ->required();
  sub->add_option("--n-experts", options->n_experts,
                  "number of routed experts (n_routed_experts in config.json; 256 for V3)")
      ->required();
  sub->add_option("--model-parallel", options->model_parallel,
                  "number of ranks (processes) the model will run on; must divide --n-experts")
      ->required();
  sub->add_flag(
      "--keep-mtp", options->keep_mtp,
      "also write the multi-token-prediction layer to mtp{rank}-mp{N}.safetensors (for --mtp); the "
      "model shards stay what convert.py writes");
  sub->add_flag(
      "--experts-int4", options->experts_int4,
      "store the routed experts' w1/w2/w3 as int4 (symmetric, one fp16 scale per row per 128 "
      "columns, "
      "rounded to nearest from the exactly dequantized weights): V3/R1 671B 673 -> 356 GB; lossy, "
      "every other tensor stays exact");
  sub->add_flag("--int8", options->int8,
                "store every linear weight (attention, MLPs, experts, head) as int8 with one fp16 "
                "scale per row per "
                "128 columns: for the bf16 V2 family (V2 236B 472 -> 240 GB, V2-Lite 31 -> 16 GB); "
                "with --experts-int4 the experts take int4");
  return {sub, [options] { convert_checkpoint(*options); }};
}

}  // namespace dsinfer::cli
