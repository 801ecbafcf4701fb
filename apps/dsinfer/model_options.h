// Options shared by the commands that run a model: where the shards are, which config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/config.h"

namespace dsinfer::cli {

struct ModelOptions {
  std::string ckpt_path;
  std::string config_path;  // empty: <ckpt_path>/config.json
  // Adds --ckpt-path (required) and --config to `sub`.
  void add_to(CLI::App* sub);
  // Reads the config (explicit path or the checkpoint's config.json); errors name the file.
  ModelConfig load_config() const;
};

}  // namespace dsinfer::cli
