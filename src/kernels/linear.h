// Matrix kernels over WeightMatrix. fp32 activations and fp32 accumulation throughout; an fp8
// row segment is dequantized exactly as the reference does (code value x block scale, in fp32)
// before the dot product, so results differ from the reference only by summation order.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// Dequantizes row `row`, columns [0, w.cols), into out[cols] (fp32).
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// y[t, r - row_begin] = sum_c x[t, c] * W[r, c] for r in [row_begin, row_end), t < n_tokens.
// x rows are x_stride apart, y rows y_stride apart. Single-threaded; `row_buffer` holds cols floats.
void matmul_rows(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w,
                 int64_t row_begin, int64_t row_end, float* y, int64_t y_stride, float* row_buffer);

// y[n_tokens, w.rows] = x[n_tokens, w.cols] @ W^T, rows split across the pool.
void linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool);

// Dot product with fp32 accumulation in 16 independent lanes (vectorizes; fixed order, so
// results do not depend on the thread count).
float dot(const float* a, const float* b, int64_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, int64_t n);

}  // namespace dsinfer
