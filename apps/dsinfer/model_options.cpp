#include "model_options.h"

#include <filesystem>

#include "core/error.h"
#include "engine/load_model.h"

namespace dsinfer::cli {

std::unique_ptr<Transformer> ModelOptions::load_model(const ModelConfig& config, Comm& comm) const {
  return load_model_on_ranks(config, ckpt_path, resolved_config_path(), comm, *kernels, mtp_on());
}

void ModelOptions::add_mtp_to(CLI::App* sub) {
  sub->add_option(
         "--mtp", mtp,
         "speculative decoding with the checkpoint's multi-token-prediction module (needs convert "
         "--keep-mtp): each step verifies one drafted token; the same tokens as off, bit for bit. "
         "auto: "
         "draft only where it measured faster for the number of running sequences")
      ->check(CLI::IsMember({"off", "on", "auto"}))
      ->capture_default_str();
  sub->add_option(
         "--draft-tokens", draft_tokens,
         "with --mtp: drafts per sequence and step (more reuse the one module on its own drafts)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
}

void ModelOptions::add_kv_cache_dtype_to(CLI::App* sub) {
  sub->add_option("--kv-cache-dtype", kv_cache_dtype,
                  "the KV cache's element type: f32 (exact, as the goldens), bf16 (half the "
                  "memory per position, as the reference demo keeps its cache; the entries are "
                  "rounded to bf16) or auto: bf16 in fast mode where its bf16 kernels run (AMX, "
                  "AVX512_BF16), which round the entries to bf16 anyway (the same results as "
                  "f32), else f32")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
}

KVDType ModelOptions::kv_dtype() const {
  if (kv_cache_dtype != "auto") return parse_kv_dtype(kv_cache_dtype);
  const bool bf16_kernels =
      kernels && kernels->fast() && kernels->fast_kernels() != FastModeKernels::kExact;
  return bf16_kernels ? KVDType::kBF16 : KVDType::kF32;
}

void ModelOptions::add_to(CLI::App* sub, const KernelConfig& kernel_config) {
  kernels = &kernel_config;
  sub->add_option("--ckpt-path", ckpt_path,
                  "directory of converted shards model{rank}-mp{N}.safetensors")
      ->required();
  sub->add_option(
      "--config", config_path,
      "model config (configs/*.json form or HF config.json; default: <ckpt-path>/config.json)");
  sub->add_option("--max-seq-len", max_seq_len,
                  "longest sequence (prompt + completion) in positions, overriding the config's "
                  "max_seq_len (the "
                  "reference's default is 16384; V3 / R1 are trained for 128k: 131072)")
      ->check(CLI::PositiveNumber);
}

std::string ModelOptions::resolved_config_path() const {
  return config_path.empty() ? (std::filesystem::path(ckpt_path) / "config.json").string()
                             : config_path;
}

ModelConfig ModelOptions::load_config() const {
  // before anything is looked up inside it, so the message names what is wrong: the directory
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(ckpt_path, ec);
  // (status() says why it failed: a symlink loop or a name too long is not "does not exist")
  check(std::filesystem::exists(st), "--ckpt-path ", ckpt_path,
        ec && ec != std::errc::no_such_file_or_directory ? ": " + ec.message()
                                                         : std::string(" does not exist"));
  check(std::filesystem::is_directory(st), "--ckpt-path ", ckpt_path,
        " is not a directory (it names the directory dsinfer convert wrote: "
        "model{rank}-mp{N}.safetensors, "
        "config.json and the tokenizer files)");
  const std::string path = resolved_config_path();
  if (config_path.empty())
    check(std::filesystem::exists(path), "no --config given and ", path,
          " does not exist (dsinfer convert copies it; or pass --config configs/config_671B.json)");
  ModelConfig config = dsinfer::load_config(path);
  if (max_seq_len > 0) config.max_seq_len = max_seq_len;
  return config;
}

}  // namespace dsinfer::cli
