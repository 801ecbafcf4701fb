// `dsinfer bench --golden DIR`: how far exact and fast mode land from the reference's fp32
// logits on a golden model (DIR/hf, DIR/ref-mp1-fp32.{json,safetensors}), next to how far the
// reference demo's own bf16 run lands (DIR/ref-mp1-bf16.safetensors): fast mode must be at
// least as close as the demo's bf16 run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/thread_pool.h"
#include "kernels/kernel_config.h"

namespace dsinfer::cli {

// Converts DIR/hf into a temporary directory, runs the fp32 case in both modes (one process),
// and returns {"dir", "rows", "exact"|"fast"|"demo_bf16": {median_ratio, worst_ratio, far_rows,
// argmax_mismatches}}, with `kernels`' ISA and tuning (exact and fast). Errors name the file.
nlohmann::json compare_with_golden(const std::string& dir, ThreadPool& pool,
                                   const KernelConfig& kernels);

// The table of that comparison, on stdout.
void print_golden_comparison(const nlohmann::json& comparison);

}  // namespace dsinfer::cli
