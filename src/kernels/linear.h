// Matrix products over WeightMatrix. Exact mode (the default): fp32 activations and fp32
// accumulation; fp8 codes are widened exactly inside the kernels and their block scales applied
// in fp32, so results differ from the reference's dequantize-then-matmul only by summation
// order. Fast mode (KernelConfig::act kBF16) rounds the activations to bf16 first. Which kernel
// runs is kernels/kernel_plan.h's plan(); the kernels per ISA live in matmul_*.cpp
// (matmul_isa.h), the fast ones in matmul_amx.cpp and matmul_bf16dot_{gemm,gemv}_avx512.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu.h"
#include "core/mat_view.h"
#include "core/thread_pool.h"
#include "kernels/kernel_config.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// Dequantizes row `row`, columns [0, w.cols), into out[cols] (fp32).
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// y[n_tokens, w.rows] = x[n_tokens, w.cols] @ W^T, rows split across the pool, with the kernel
// plan(w, n_tokens, config) names.
void linear(const KernelConfig& config, const float* x, int64_t n_tokens, const WeightMatrix& w,
            float* y, ThreadPool& pool);

// Rows [first, first + count) of a weight matrix.
struct RowSpan {
  int64_t first = 0, count = 0;
};

// y[t, r] = sum_c x[t, c] * W[r, c] for every row r of w and token t: x [n_tokens, w.cols] ->
// y [n_tokens, w.rows], on the calling thread only: for callers that split other work across the
// pool (attention heads). Same kernels, hence the same numbers, as linear() in exact mode; in fast
// mode, from kFastGemmMinTokens tokens on fast mode's kernels, both operands are rounded to bf16
// (attention's products, where both are activations), else it stays exact (ProductUse::kSerial).
void matmul_serial(const KernelConfig& config, ConstMatView x, const WeightMatrix& w, MatView y);

// out[t, c] = sum_{d < rows.count} coef[t, d] * W[rows.first + d, c] for every set t and column c
// of w: coef [n_sets, rows.count] -> out [n_sets, w.cols]. Rows of a weight matrix combined with
// coefficients (W^T times each set, e.g. a query absorbed through wkv_b's key rows), straight from
// fp8/bf16, on the calling thread, with the kernels of `isa`. Exact mode's numbers in either mode
// (fp32 coefficients and accumulation).
void combine_rows(Isa isa, const WeightMatrix& w, RowSpan rows, ConstMatView coef, MatView out);
// y[t, r] = x[t] . W[r] for every token t and row r of w (f32 or bf16 rows): x [n_tokens, w.cols]
// -> y [n_tokens, w.rows], in the ISA's canonical order (the bits of linear() and of
// matmul_serial in exact mode), on the calling thread, register-blocked for a few tokens against
// many long rows: attention's scores (heads against cached keys), 2-3x the canonical GEMM's speed
// there.
void dot_rows(Isa isa, ConstMatView x, const WeightMatrix& w, MatView y);
// out += the same sum, continuing each output's chain: combine_rows over rows [0, a) of one matrix
// then accumulate_rows over rows [0, b) of another gives the bits of one combine_rows over the
// a + b rows stacked (attention over a KV cache's blocks, each its own matrix).
void accumulate_rows(Isa isa, const WeightMatrix& w, RowSpan rows, ConstMatView coef, MatView out);

// Dot product with fp32 accumulation in 16 independent lanes (vectorizes; fixed order, so
// results do not depend on the thread count).
float dot(const float* a, const float* b, int64_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, int64_t n);

}  // namespace dsinfer
