// A weight matrix as it sits in the mapped checkpoint: row-major [rows, cols] of
//   bf16 or f32;
//   fp8 e4m3 with one float scale per 128x128 block ([ceil(rows/128), ceil(cols/128)], edge
//     blocks partial) in `scale`;
//   int4 (DType kU8: packed nibbles) or int8 (kI8), with one fp16 scale per row per 128 columns
//     ([rows, ceil(cols/128)]) in `group_scale` (kernels/group_quant.h has the layout).
// Kernels dequantize on the fly; weights are never copied or widened in memory.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/group_quant.h"

namespace dsinfer {

struct Int8Matrix;

struct WeightMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;  // out features
  int64_t cols = 0;  // in features
  const uint8_t* data = nullptr;
  const float* scale = nullptr;           // fp8 only
  const uint16_t* group_scale = nullptr;  // int4 / int8 only: fp16 bits
  // int8 mode's repacked form of this matrix (kernels/int8_matrix.h), where the model made one:
  // int8 mode's products read it instead of `data`
  const Int8Matrix* int8 = nullptr;
  // Bytes from one row to the next where the rows are not packed (leading_columns' views of a
  // wider matrix); 0: packed, the stride the format gives.
  int64_t padded_stride = 0;

  bool empty() const { return data == nullptr; }
  // The format, described here once for code outside the kernels (the kernels' own description
  // of each format is Format<kind> in matmul_impl.h).
  bool block_scaled() const { return dtype == DType::kF8E4M3; }
  bool group_scaled() const { return dtype == kInt4Storage || dtype == kInt8Storage; }
  QuantFormat quant_format() const {
    return dtype == kInt4Storage ? QuantFormat::kInt4 : QuantFormat::kInt8;
  }
  // Bytes from the start of one row to the next (int4 rows are padded to 32 columns).
  int64_t row_stride() const;
  int64_t scale_cols() const { return ceil_div(cols, kFp8Block); }
  // Bytes of the weight data (plus block or group scales): what one full pass reads from memory
  // (of the int8 form where there is one).
  int64_t bytes() const;
  // Bytes one row reads (an embedding lookup): its elements plus its row of scales.
  int64_t row_bytes_read() const;
  // Rows [first, first + count) as a matrix of their own sharing this one's memory, when that
  // needs no copy (block-scaled formats: `first` starts a scale block); else an empty matrix.
  WeightMatrix row_range(int64_t first, int64_t count) const;
  // Columns [0, n) of every row as a matrix sharing this one's memory (f32 and bf16 only): e.g. a
  // cache block's latents without their rope keys. The row kernels (combine_rows,
  // accumulate_rows, dot_rows, dequantize_row) read such views; linear and matmul_serial refuse
  // them.
  WeightMatrix leading_columns(int64_t n) const;
};

}  // namespace dsinfer
