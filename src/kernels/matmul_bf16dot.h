// Fast mode's matrix product on CPUs with AVX512_BF16 but no AMX (AMD Zen 4 / Zen 5, Intel
// Cooper Lake): VDPBF16PS, 32 bf16 multiply-adds an instruction into 16 fp32 lanes, twice the
// fp32 FMA rate. The same numbers contract as the AMX kernels (matmul_amx.h): activations rounded
// to bf16 once, fp8 codes and bf16 weights converted to bf16 exactly (every e4m3 value is a bf16
// number), fp32 accumulation, each fp8 block scale applied in fp32 to its 128 columns' partial
// sums. The only rounding beyond fp32 is that of the activations (and of f32 weights, which only
// matmul_serial rounds: attention's products, where both sides are activations).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/kernel_plan.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// y[n_tokens, w.rows] = bf16(x)[n_tokens, w.cols] @ W^T, rows split across the pool. Only where the
// CPU runs the AVX-512 kernels (which include AVX512_BF16); f32 weights are rounded to bf16
// (linear() sends them to the exact kernels).
void bf16dot_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                    ThreadPool& pool);

// Fast-mode products of few tokens (decode batches): y[n_tokens, w.rows] = bf16(x) @ W^T as a
// GEMV (each weight vector converted once for every token), fp32 sums per 128-column block times
// its scale; rows split across the pool. 1 <= n_tokens <= kBf16DotGemvMaxTokens (kernel_plan.h);
// f32 weights are rounded.
void bf16dot_gemv(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                  ThreadPool& pool);

// The same on the calling thread, x rows x_stride apart and y rows y_stride apart.
void bf16dot_matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride,
                           const WeightMatrix& w, float* y, int64_t y_stride);

}  // namespace dsinfer
