// The reference's checkpoint tools: convert.py (HF checkpoint -> tensor-parallel shards) and
// fp8_cast_bf16.py (fp8 HF checkpoint -> bf16 HF checkpoint). Both stream: memory stays
// bounded by a few tensors (inputs are mapped, outputs written slice by slice).
#pragma once

#include <string>

namespace dsinfer {

struct ConvertOptions {
  std::string hf_ckpt_path;
  std::string save_path;
  int n_experts = 0;
  int model_parallel = 1;
};

// Writes save_path/model{i}-mp{P}.safetensors for i < P, tensor for tensor as convert.py does,
// and copies the *token* files and config.json. Throws Error on bad input (see convert.cpp).
void convert_checkpoint(const ConvertOptions& options);

// Dequantizes every fp8 weight with its weight_scale_inv (round to nearest even to bf16),
// drops the scales, copies the rest, rewrites model.safetensors.index.json.
void fp8_cast_bf16(const std::string& input_dir, const std::string& output_dir);

}  // namespace dsinfer
