// The plan table: which kernel serves each kind of a model's matrices at each token count
// (`dsinfer bench --explain-kernels`; tests/kernel_plan_test.cpp pins it per CPU family).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_config.h"
#include "kernels/weight_matrix.h"
#include "model/transformer.h"

namespace dsinfer {

struct NamedMatrix {
  std::string name;
  WeightMatrix matrix;  // only its format and shape matter to a plan
};

// One matrix of each kind on this rank: the first dense layer's, the first MoE layer's (its
// router, shared expert and first local expert, as "moe.expert.w1" ...) and the head; not wkv_b,
// which attention reads through combine_rows.
std::vector<NamedMatrix> matrix_kinds(const Transformer& model);

// A line per matrix and token count: name, format, shape, tokens, the plan (kernel_plan.h).
std::string kernel_plan_table(const std::vector<NamedMatrix>& matrices,
                              const std::vector<int64_t>& token_counts, const KernelConfig& config);

}  // namespace dsinfer
