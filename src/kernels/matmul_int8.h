// int8 mode's kernels (the numbers are int8_matrix.h's): one per instruction set, each computing
// rows of y = x W^T from quantized activations and a repacked matrix, and int8_linear, which
// quantizes x and splits the row blocks across the pool.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/int8_matrix.h"
#include "kernels/kernel_config.h"

namespace dsinfer {

// y[t * y_stride + r] for every token t and the rows r of row blocks [block_begin, block_end)
// (rows past w.rows are not written), on the calling thread. The scalar kernel takes activations
// in either form; the others in their kernel's (int8_bytes_of).
using Int8BlocksFn = void (*)(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                              int64_t block_end, float* y, int64_t y_stride);
void int8_blocks_scalar(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                        int64_t block_end, float* y, int64_t y_stride);
// VPMADDUBSW + VPMADDWD: |qw| (unsigned) times qx with qw's sign, pairs summed in int16 (at most
// 2 x 127 x 127 = 32258: never saturates, as no q is -128), then in int32.
void int8_blocks_avx2(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                      int64_t block_end, float* y, int64_t y_stride);
// VPDPBUSD: (qx + 128) as unsigned bytes times qw, 4 products an int32 lane, from the row's
// -128 x sum(qw) offset, which leaves the exact sum of qx x qw.
void int8_blocks_avx512vnni(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                            int64_t block_end, float* y, int64_t y_stride);
Int8BlocksFn int8_blocks_fn(Int8Kernel kernel);
// The activation bytes `kernel` reads.
Int8Bytes int8_bytes_of(Int8Kernel kernel);

// y[n_tokens, w.rows] = x[n_tokens, w.cols] @ W^T in int8 mode.
void int8_linear(Int8Kernel kernel, const float* x, int64_t n_tokens, const Int8Matrix& w, float* y,
                 ThreadPool& pool);

}  // namespace dsinfer
