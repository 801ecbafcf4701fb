// A weight matrix as it sits in the mapped checkpoint: row-major [rows, cols] of bf16, f32, or
// fp8 e4m3 with one float scale per 128x128 block ([ceil(rows/128), ceil(cols/128)], edge
// blocks partial). Kernels dequantize on the fly; weights are never copied or widened in memory.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dsinfer {

struct WeightMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;  // out features
  int64_t cols = 0;  // in features
  const uint8_t* data = nullptr;
  const float* scale = nullptr;  // fp8 only

  bool empty() const { return data == nullptr; }
  // The format, described here once for code outside the kernels (the kernels' own description
  // of each format is Format<kind> in matmul_impl.h).
  int64_t element_bytes() const { return static_cast<int64_t>(dtype_size(dtype)); }
  bool block_scaled() const { return dtype == DType::kF8E4M3; }
  int64_t scale_cols() const { return ceil_div(cols, kFp8Block); }
  // Bytes of the weight data (plus block scales): what one full pass reads from memory.
  int64_t bytes() const;
  // Bytes one row reads (an embedding lookup): its elements plus its block row of scales.
  int64_t row_bytes_read() const;
  // Rows [first, first + count) as a matrix of their own sharing this one's memory, when that
  // needs no copy (block-scaled formats: `first` starts a scale block); else an empty matrix.
  WeightMatrix row_range(int64_t first, int64_t count) const;
};

}  // namespace dsinfer
