#include "model_options.h"

#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/weights.h"

namespace dsinfer::cli {

void ModelOptions::add_to(CLI::App* sub) {
  sub->add_option("--ckpt-path", ckpt_path, "directory of converted shards model{rank}-mp{N}.safetensors")
      ->required();
  sub->add_option("--config", config_path,
                  "model config (configs/*.json form or HF config.json; default: <ckpt-path>/config.json)");
}

ModelConfig ModelOptions::load_config() const {
  std::string path = config_path;
  if (path.empty()) {
    path = (std::filesystem::path(ckpt_path) / "config.json").string();
    check(std::filesystem::exists(path), "no --config given and ", path,
          " does not exist (dsinfer convert copies it; or pass --config configs/config_671B.json)");
  }
  return dsinfer::load_config(path);
}

std::unique_ptr<Transformer> ModelOptions::load_model(const ModelConfig& config, Comm& comm) const {
  shard_path(ckpt_path, comm.rank(), comm.world_size());  // throws naming the missing shard
  return Transformer::load(config, ckpt_path, comm, ThreadPool::global());
}

}  // namespace dsinfer::cli
