#include <memory>

#include "commands.h"
#include "convert/make_random.h"

namespace dsinfer::cli {

Command register_make_random(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("make-random",
                         "write a Hugging Face-layout checkpoint of any DeepSeek config with "
                         "deterministic random weights\n"
                         "(fp8 with 128x128 block scales when the config has an fp8 "
                         "quantization_config, else bf16), for\n"
                         "benchmarks and tests; then `dsinfer convert` it like a real one");
  auto options = std::make_shared<MakeRandomOptions>();
  sub->add_option("--config", options->config_path,
                  "Hugging Face config.json of the model (e.g. configs/bench_v3_slice.json); "
                  "copied as OUT/config.json")
      ->required();
  sub->add_option("--out", options->out_dir,
                  "output directory (created if missing): model-0000i-of-0000n.safetensors, "
                  "model.safetensors.index.json, config.json")
      ->required();
  sub->add_option("--seed", options->seed,
                  "random seed; each tensor's values depend only on the seed and its name")
      ->capture_default_str();
  sub->add_option("--shard-gb", options->shard_gb, "size limit of one shard file in GB (1e9 bytes)")
      ->capture_default_str();
  sub->add_option("--tokenizer-from", options->tokenizer_from,
                  "copy the *token* files of this directory into OUT (convert carries them on)");
  return {sub, [options] { make_random_checkpoint(*options); }};
}

}  // namespace dsinfer::cli
