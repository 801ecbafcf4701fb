#include "kernels/weight_matrix.h"

#include "core/error.h"
#include "kernels/int8_matrix.h"

namespace dsinfer {

int64_t WeightMatrix::row_stride() const {
  if (padded_stride != 0) return padded_stride;
  if (group_scaled()) return quant_row_bytes(quant_format(), cols);
  return cols * static_cast<int64_t>(dtype_size(dtype));
}

int64_t WeightMatrix::bytes() const {
  if (int8 != nullptr) return int8->bytes();
  int64_t n = rows * row_stride();
  if (block_scaled())
    n += ceil_div(rows, kFp8Block) * scale_cols() * static_cast<int64_t>(sizeof(float));
  if (group_scaled()) n += rows * quant_groups(cols) * static_cast<int64_t>(sizeof(uint16_t));
  return n;
}

int64_t WeightMatrix::row_bytes_read() const {
  int64_t n = row_stride();
  if (block_scaled()) n += scale_cols() * static_cast<int64_t>(sizeof(float));
  if (group_scaled()) n += quant_groups(cols) * static_cast<int64_t>(sizeof(uint16_t));
  return n;
}

WeightMatrix WeightMatrix::row_range(int64_t first, int64_t count) const {
  if (block_scaled() && first % kFp8Block != 0) return {};
  WeightMatrix part{dtype, count, cols, data + first * row_stride(), nullptr, nullptr};
  if (block_scaled()) part.scale = scale + (first / kFp8Block) * scale_cols();
  if (group_scaled()) part.group_scale = group_scale + first * quant_groups(cols);
  part.padded_stride = padded_stride;
  return part;
}

WeightMatrix WeightMatrix::leading_columns(int64_t n) const {
  check(dtype == DType::kF32 || dtype == DType::kBF16, "leading_columns of a ", dtype_name(dtype),
        " matrix (f32 or bf16 only)");
  check(n > 0 && n <= cols, "leading_columns(", n, ") of a matrix of ", cols, " columns");
  WeightMatrix view{dtype, rows, n, data};
  view.padded_stride = row_stride();
  return view;
}

}  // namespace dsinfer
