#include "kernels/int8_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/linear.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

bool int8_repackable(const WeightMatrix& w) {
  return !w.empty() && (w.dtype == DType::kF8E4M3 || w.dtype == DType::kBF16 ||
                        w.dtype == kInt8Storage || w.dtype == kInt4Storage);
}

namespace {

// Row r's q [cols] and fp16 group scales: an int8 or int4 matrix's as stored, else
// quantize_row's of the exactly dequantized row.
void int8_row(const WeightMatrix& w, int64_t r, std::vector<float>& widened, uint8_t* q,
              uint16_t* scales) {
  if (w.group_scaled()) {
    const uint8_t* row = w.data + r * w.row_stride();
    if (w.dtype == kInt4Storage) {
      for (int64_t c = 0; c < w.cols; ++c) q[c] = static_cast<uint8_t>(int4_q(row, c));
    } else {
      std::memcpy(q, row, static_cast<size_t>(w.cols));
    }
    std::memcpy(scales, w.group_scale + r * quant_groups(w.cols),
                static_cast<size_t>(quant_groups(w.cols)) * sizeof(uint16_t));
    return;
  }
  widened.resize(static_cast<size_t>(w.cols));
  dequantize_row(w, r, widened.data());
  quantize_row(QuantFormat::kInt8, widened.data(), w.cols, q, scales);
}

}  // namespace

Int8Matrix repack_int8(const WeightMatrix& w, ThreadPool& pool) {
  Int8Matrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  m.int4 = w.dtype == kInt4Storage;
  const int64_t blocks = m.row_blocks(), groups = m.groups();
  m.q = AlignedArray<int8_t>(blocks * m.block_bytes());
  m.scale = AlignedArray<uint16_t>(blocks * groups * kInt8RowBlock);
  m.q_sum = AlignedArray<int16_t>(blocks * groups * kInt8RowBlock);
  pool.parallel_for(blocks, [&](int64_t begin, int64_t end) {
    std::vector<float> widened;
    std::vector<uint8_t> q(static_cast<size_t>(m.padded_cols()));
    std::vector<uint16_t> scales(static_cast<size_t>(groups));
    for (int64_t b = begin; b < end; ++b) {
      int8_t* block = m.q.data() + b * m.block_bytes();
      uint16_t* block_scale = m.scale.data() + b * groups * kInt8RowBlock;
      int16_t* block_sum = m.q_sum.data() + b * groups * kInt8RowBlock;
      for (int64_t lane = 0; lane < kInt8RowBlock; ++lane) {
        const int64_t r = b * kInt8RowBlock + lane;
        std::fill(q.begin(), q.end(), uint8_t{0});
        std::fill(scales.begin(), scales.end(), uint16_t{0});
        if (r < w.rows) int8_row(w, r, widened, q.data(), scales.data());
        if (m.int4) {
          for (int64_t c = 0; c < m.padded_cols(); c += 8)
            for (int j = 0; j < 4; ++j) {
              const int low = static_cast<int8_t>(q[c + j]) + 8;
              const int high = static_cast<int8_t>(q[c + 4 + j]) + 8;
              block[((c / 8) * kInt8RowBlock + lane) * 4 + j] =
                  static_cast<int8_t>(static_cast<uint8_t>(low | (high << 4)));
            }
        } else {
          for (int64_t c = 0; c < m.padded_cols(); ++c)
            block[((c / 4) * kInt8RowBlock + lane) * 4 + c % 4] = static_cast<int8_t>(q[c]);
        }
        for (int64_t g = 0; g < groups; ++g) {
          int32_t sum = 0;
          for (int64_t c = g * kQuantGroup; c < (g + 1) * kQuantGroup; ++c)
            sum += static_cast<int8_t>(q[c]);
          block_scale[g * kInt8RowBlock + lane] = scales[g];
          block_sum[g * kInt8RowBlock + lane] = static_cast<int16_t>(sum);
        }
      }
    }
  });
  return m;
}

namespace {

// One token's row. Compiled for several ISAs (as linear.cpp's helpers): the baseline x86-64 has
// no rounding instruction, and a libm call per element cost as much as a small matrix's product.
// Every variant rounds the same (IEEE multiply, then nearest even), so the bits do not depend on
// which one runs.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void quantize_token(
    const float* row, int64_t cols, uint8_t bias, uint8_t* q, float* scales) {
  for (int64_t g = 0; g < quant_groups(cols); ++g) {
    const int64_t c0 = g * kQuantGroup, n = std::min(cols - c0, kQuantGroup);
    const float* x = row + c0;
    float amax = 0.0f;
    for (int64_t c = 0; c < n; ++c) amax = std::max(amax, std::fabs(x[c]));
    uint8_t* out = q + c0;
    std::fill(out, out + kQuantGroup, bias);
    bool finite = std::isfinite(amax);  // a NaN may hide from max(): look at every value
    for (int64_t c = 0; c < n && finite; ++c) finite = !std::isnan(x[c]);
    if (!finite) {
      scales[g] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    scales[g] = amax / 127.0f;
    if (amax == 0.0f) continue;
    const float inv = 127.0f / amax;
    for (int64_t c = 0; c < n; ++c) {
      const float v = std::clamp(std::nearbyint(x[c] * inv), -127.0f, 127.0f);
      out[c] = static_cast<uint8_t>(static_cast<int32_t>(v) + bias);  // (modulo 256)
    }
  }
}

}  // namespace

Int8Activations quantize_activations(ConstMatView x, Int8Bytes bytes, uint8_t* q_out,
                                     float* scale_out, ThreadPool& pool) {
  Int8Activations a{x.rows, x.cols, bytes, q_out, scale_out};
  const int64_t groups = a.groups(), padded = a.padded_cols();
  const uint8_t bias = bytes == Int8Bytes::kBiased ? 128 : 0;
  pool.parallel_for(x.rows, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      quantize_token(x.row(t), x.cols, bias, q_out + t * padded, scale_out + t * groups);
  });
  return a;
}

}  // namespace dsinfer
