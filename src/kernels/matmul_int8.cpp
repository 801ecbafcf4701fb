#include "kernels/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsinfer {

void int8_blocks_scalar(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                        int64_t block_end, float* y, int64_t y_stride) {
  const int64_t groups = w.groups(), padded = w.padded_cols();
  const int64_t row_end = std::min(w.rows, block_end * kInt8RowBlock);
  for (int64_t r = block_begin * kInt8RowBlock; r < row_end; ++r) {
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const uint8_t* q = x.q + t * padded;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t sum = 0;
        for (int64_t c = g * kQuantGroup; c < (g + 1) * kQuantGroup; ++c) {
          const int32_t qx = x.bytes == Int8Bytes::kBiased ? static_cast<int32_t>(q[c]) - 128
                                                           : static_cast<int8_t>(q[c]);
          sum += qx * w.at(r, c);
        }
        acc = std::fma(static_cast<float>(sum), x.scale[t * groups + g] * w.row_scale(r, g), acc);
      }
      y[t * y_stride + r] = acc;
    }
  }
}

Int8Bytes int8_bytes_of(Int8Kernel kernel) {
  return kernel == Int8Kernel::kAvx2 ? Int8Bytes::kSigned : Int8Bytes::kBiased;
}

Int8BlocksFn int8_blocks_fn(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kAvx512Vnni:
      return int8_blocks_avx512vnni;
    case Int8Kernel::kAvx2:
      return int8_blocks_avx2;
    default:
      return int8_blocks_scalar;
  }
}

void int8_linear(Int8Kernel kernel, const float* x, int64_t n_tokens, const Int8Matrix& w, float* y,
                 ThreadPool& pool) {
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> scales;
  q.resize(static_cast<size_t>(int8_activation_bytes(n_tokens, w.cols)));
  scales.resize(static_cast<size_t>(int8_activation_scales(n_tokens, w.cols)));
  const Int8Activations a = quantize_activations(
      ConstMatView(x, n_tokens, w.cols), int8_bytes_of(kernel), q.data(), scales.data(), pool);
  const Int8BlocksFn blocks = int8_blocks_fn(kernel);
  // Below this many multiply-adds, waking other threads costs more than it saves; chunks of 4
  // blocks keep the kernels' widest tiles whole.
  constexpr int64_t kMinParallelWork = 1 << 16;
  int64_t grain = std::max<int64_t>(
      1, kMinParallelWork / std::max<int64_t>(1, kInt8RowBlock * w.cols * n_tokens));
  grain = ceil_div(grain, 4) * 4;
  pool.parallel_for(
      w.row_blocks(), [&](int64_t begin, int64_t end) { blocks(a, w, begin, end, y, w.rows); },
      grain);
}

}  // namespace dsinfer
