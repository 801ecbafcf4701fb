// What `convert --experts-int4` / `--int8` made of a checkpoint's linear weights (the issue's
// opt-in lossy formats; kernels/group_quant.h has the formats). Each shard says it in its
// safetensors metadata ("dsinfer.experts": "int4-g128", "dsinfer.linear": "int8-g128"; absent: the
// checkpoint's own fp8 or bf16, byte for byte what the reference's convert.py writes); the loader
// holds every tensor to it, and ranks compare it before loading (engine/load_model.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kernels/group_quant.h"

namespace dsinfer {

struct Quantization {
  bool experts_int4 = false;  // routed experts' w1 / w2 / w3 in int4
  bool linear_int8 = false;   // every other linear weight (attention, dense and shared MLPs, head)
                              // in int8, and the routed experts too unless experts_int4

  bool any() const { return experts_int4 || linear_int8; }
  bool operator==(const Quantization&) const = default;
  // The stored format of a linear weight (of a routed expert or not), or nullopt: as converted.
  std::optional<QuantFormat> format_of(bool routed_expert) const;
  // "int4 routed experts, int8 other linear weights" / "the checkpoint's own formats (fp8 or bf16)"
  std::string describe() const;
  std::map<std::string, std::string> metadata() const;  // empty when !any()
};

// The shard's quantization from its metadata; throws Error naming `path` for an unknown
// "dsinfer.*" key or value (a shard written by another version).
Quantization quantization_of(const std::map<std::string, std::string>& metadata,
                             const std::string& path);

// Whether a converted tensor name is a Linear's weight (wq, wq_a, wq_b, wkv_a, wkv_b, wo, w1, w2,
// w3 of a layer or of the MTP block, or the head): what --int8 and --experts-int4 may change.
bool is_linear_weight(const std::string& converted_name);
// Whether it is a routed expert's ("...ffn.experts.{j}.w1.weight").
bool is_routed_expert_weight(const std::string& converted_name);

}  // namespace dsinfer
