// Options shared by the commands that run a model: where the shards are, which config.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/transformer.h"
#include "parallel/comm.h"

namespace dsinfer::cli {

struct ModelOptions {
  std::string ckpt_path;
  std::string config_path;  // empty: <ckpt_path>/config.json
  // Adds --ckpt-path (required) and --config to `sub`.
  void add_to(CLI::App* sub);
  // Reads the config (explicit path or the checkpoint's config.json); errors name the file.
  ModelConfig load_config() const;
  // Loads this rank's shard model{rank}-mp{world_size}; a shard set that does not match the
  // world size is reported as such (on every rank) before anything else is checked.
  std::unique_ptr<Transformer> load_model(const ModelConfig& config, Comm& comm) const;
};

}  // namespace dsinfer::cli
