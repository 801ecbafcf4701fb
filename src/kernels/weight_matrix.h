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
  int64_t scale_cols() const { return ceil_div(cols, kFp8Block); }
  // Bytes of the weight data (plus fp8 scales): what one full pass reads from memory.
  int64_t bytes() const;
};

}  // namespace dsinfer
