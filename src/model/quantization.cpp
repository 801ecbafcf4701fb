#include "model/quantization.h"

#include <array>
#include <string_view>

#include "core/error.h"

namespace dsinfer {

namespace {
constexpr const char* kExpertsKey = "dsinfer.experts";
constexpr const char* kLinearKey = "dsinfer.linear";
constexpr const char* kInt4Value = "int4-g128";
constexpr const char* kInt8Value = "int8-g128";
}  // namespace

std::optional<QuantFormat> Quantization::format_of(bool routed_expert) const {
  if (routed_expert && experts_int4) return QuantFormat::kInt4;
  if (linear_int8) return QuantFormat::kInt8;
  return std::nullopt;
}

std::string Quantization::describe() const {
  if (experts_int4 && linear_int8) return "int4 routed experts, int8 other linear weights";
  if (experts_int4) return "int4 routed experts, every other tensor as converted";
  if (linear_int8) return "int8 linear weights";
  return "the checkpoint's own formats (fp8 or bf16)";
}

std::map<std::string, std::string> Quantization::metadata() const {
  std::map<std::string, std::string> m;
  if (experts_int4) m[kExpertsKey] = kInt4Value;
  if (linear_int8) m[kLinearKey] = kInt8Value;
  return m;
}

Quantization quantization_of(const std::map<std::string, std::string>& metadata,
                             const std::string& path) {
  Quantization q;
  for (const auto& [key, value] : metadata) {
    if (key.rfind("dsinfer.", 0) != 0) continue;  // "format": "pt" and the like
    if (key == kExpertsKey && value == kInt4Value) {
      q.experts_int4 = true;
    } else if (key == kLinearKey && value == kInt8Value) {
      q.linear_int8 = true;
    } else {
      fail(path, ": metadata ", key, " = \"", value,
           "\" is not a weight format this dsinfer knows (", kExpertsKey, " = \"", kInt4Value,
           "\", ", kLinearKey, " = \"", kInt8Value, "\"); written by another version?");
    }
  }
  return q;
}

bool is_linear_weight(const std::string& name) {
  if (name == "head.weight") return true;
  static constexpr std::array<std::string_view, 9> kKeys = {"wq", "wq_a", "wq_b", "wkv_a", "wkv_b",
                                                            "wo", "w1",   "w2",   "w3"};
  if (!name.ends_with(".weight")) return false;
  const std::string_view stem(name.data(), name.size() - 7);
  const size_t dot = stem.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view key = stem.substr(dot + 1);
  // a layer's or the MTP block's (the MTP's eh_proj, embed and head are not in the table)
  const bool in_block = name.rfind("layers.", 0) == 0 || name.rfind("mtp.", 0) == 0;
  for (std::string_view k : kKeys)
    if (key == k) return in_block;
  return false;
}

bool is_routed_expert_weight(const std::string& name) {
  return is_linear_weight(name) && name.find(".ffn.experts.") != std::string::npos;
}

}  // namespace dsinfer
