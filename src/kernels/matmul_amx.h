// Fast mode's matrix product on CPUs with AMX (Sapphire Rapids and later): bf16 activations
// times the weights converted to bf16 exactly (fp8 codes and bf16 values are all bf16
// numbers), fp32 accumulation in tile registers; fp8 block scales are applied in fp32 to each
// 128-column block's partial sums, so the only rounding beyond fp32 is that of the activations.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// True when the CPU has AMX-BF16 and the kernel lets this process use the tile registers
// (asked once).
bool amx_usable();

// y[n_tokens, w.rows] = bf16(x)[n_tokens, w.cols] @ W^T with the AMX tiles, rows split across
// the pool. Only when amx_usable(); exact for fp8 and bf16 weights (f32 ones are rounded).
void amx_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                ThreadPool& pool);

// The same on the calling thread, x rows x_stride apart and y rows y_stride apart; f32 weights
// are rounded to bf16 too (fast-mode attention, where both sides are activations).
void amx_matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w,
                       float* y, int64_t y_stride);

}  // namespace dsinfer
