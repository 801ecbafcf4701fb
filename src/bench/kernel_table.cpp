#include "bench/kernel_table.h"

#include <cstdio>

#include "kernels/kernel_plan.h"

namespace dsinfer {

std::vector<NamedMatrix> matrix_kinds(const Transformer& model) {
  std::vector<NamedMatrix> out;
  bool dense_seen = false, moe_seen = false, attention_listed = false;
  const std::string expert_prefix = "moe.experts.";
  for (const LayerWeights& lw : model.weights().layers) {
    bool& seen = lw.is_moe ? moe_seen : dense_seen;
    if (seen) continue;
    seen = true;
    for_each_matrix(lw, [&](const std::string& name, const WeightMatrix& m) {
      if (name.rfind("attn.", 0) == 0 && attention_listed)
        return;  // every layer's attention is alike
      if (name == "attn.wkv_b")
        return;  // attention reads it through combine_rows (see the table's end)
      if (name.rfind(expert_prefix, 0) == 0) {
        if (name.rfind(expert_prefix + "0.", 0) != 0)
          return;  // the first local expert stands for all
        return out.push_back({"moe.expert" + name.substr(expert_prefix.size() + 1), m});
      }
      out.push_back({name, m});
    });
    attention_listed = true;
  }
  out.push_back({"head", model.weights().head});
  return out;
}

namespace {

std::string format_of(const WeightMatrix& m) {
  if (m.group_scaled()) return quant_format_name(m.quant_format());
  return std::string(dtype_name(m.dtype));
}

}  // namespace

std::string kernel_plan_table(const std::vector<NamedMatrix>& matrices,
                              const std::vector<int64_t>& token_counts,
                              const KernelConfig& config) {
  std::string out = "kernels: " + describe(config) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-18s %-5s %15s %6s  %s\n", "matrix", "dtype", "rows x cols",
                "tokens", "plan");
  out += line;
  for (const NamedMatrix& m : matrices)
    for (int64_t n : token_counts) {
      const std::string shape =
          std::to_string(m.matrix.rows) + " x " + std::to_string(m.matrix.cols);
      std::snprintf(line, sizeof line, "%-18s %-5s %15s %6lld  %s\n", m.name.c_str(),
                    format_of(m.matrix).c_str(), shape.c_str(), static_cast<long long>(n),
                    describe(plan(m.matrix, n, config)).c_str());
      out += line;
    }
  out += std::string("attention: wkv_b through combine_rows (") + isa_name(config.isa) +
         ") and matmul_serial; scores through " + (config.fast() ? "matmul_serial" : "dot_rows") +
         "; fast mode's prefill from 8 queries on the bf16 kernels where the plan has them\n";
  return out;
}

}  // namespace dsinfer
