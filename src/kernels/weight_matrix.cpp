#include "kernels/weight_matrix.h"

namespace dsinfer {

int64_t WeightMatrix::bytes() const {
  int64_t n = rows * cols * element_bytes();
  if (block_scaled()) n += ceil_div(rows, kFp8Block) * scale_cols() * static_cast<int64_t>(sizeof(float));
  return n;
}

int64_t WeightMatrix::row_bytes_read() const {
  return cols * element_bytes() + (block_scaled() ? scale_cols() * static_cast<int64_t>(sizeof(float)) : 0);
}

WeightMatrix WeightMatrix::row_range(int64_t first, int64_t count) const {
  if (block_scaled() && first % kFp8Block != 0) return {};
  return {dtype, count, cols, data + first * cols * element_bytes(),
          block_scaled() ? scale + (first / kFp8Block) * scale_cols() : nullptr};
}

}  // namespace dsinfer
