// Options shared by the commands that run a model: where the shards are, which config.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kernels/kernel_config.h"
#include "model/config.h"
#include "model/transformer.h"
#include "parallel/comm.h"

namespace dsinfer::cli {

struct ModelOptions {
  std::string ckpt_path;
  std::string config_path;              // empty: <ckpt_path>/config.json
  std::string mtp = "off";              // --mtp off | on | auto
  int draft_tokens = 1;                 // --draft-tokens K: MTP drafts per sequence and step
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype auto | f32 | bf16
  int max_seq_len =
      0;  // --max-seq-len: overrides the config's (0: the config's, else the reference's 16384)
  // How the model's products run: the command line's (main fills it in before a command runs).
  const KernelConfig* kernels = nullptr;
  // Adds --ckpt-path (required), --config and --max-seq-len to `sub`; the model will run with
  // `kernel_config`.
  void add_to(CLI::App* sub, const KernelConfig& kernel_config);
  // Adds --mtp (speculative decoding with the checkpoint's multi-token-prediction module).
  void add_mtp_to(CLI::App* sub);
  bool mtp_on() const { return mtp != "off"; }  // the module is loaded and runs
  bool mtp_auto() const { return mtp == "auto"; }
  // Adds --kv-cache-dtype (the KV cache's element type).
  void add_kv_cache_dtype_to(CLI::App* sub);
  // auto: bf16 where fast mode's bf16 kernels run (which round every cached entry to bf16 before
  // using it, so the bits are an f32 cache's: tests/attention_paths_test), else f32.
  KVDType kv_dtype() const;
  // Reads the config (explicit path or the checkpoint's config.json); errors name the file.
  ModelConfig load_config() const;
  // The config file load_config() reads.
  std::string resolved_config_path() const;
  // Loads this rank's shard model{rank}-mp{world_size}; a shard set that does not match the
  // world size is reported as such (on every rank) before anything else is checked. At world
  // size > 1 the ranks first compare their configs and shard headers: a rank that loaded another
  // checkpoint or config, or failed to load, is the same Error on every rank. With --mtp on, also
  // the MTP module (mtp{rank}-mp{world_size}, written by convert --keep-mtp).
  std::unique_ptr<Transformer> load_model(const ModelConfig& config, Comm& comm) const;
};

}  // namespace dsinfer::cli
