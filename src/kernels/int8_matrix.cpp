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
  return !w.empty() &&
         (w.dtype == DType::kF8E4M3 || w.dtype == DType::kBF16 || w.dtype == kInt8Storage);
}

namespace {

// Row r's q [cols] and fp16 group scales: an int8 matrix's as stored, else quantize_row's of the
// exactly dequantized row.
void int8_row(const WeightMatrix& w, int64_t r, std::vector<float>& widened, uint8_t* q,
              uint16_t* scales) {
  if (w.dtype == kInt8Storage) {
    std::memcpy(q, w.data + r * w.row_stride(), static_cast<size_t>(w.cols));
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
  const int64_t blocks = m.row_blocks(), groups = m.groups(), k4 = m.padded_cols() / 4;
  m.q = AlignedArray<int8_t>(blocks * kInt8RowBlock * m.padded_cols());
  m.scale = AlignedArray<float>(blocks * groups * kInt8RowBlock);
  m.offset = AlignedArray<int32_t>(blocks * groups * kInt8RowBlock);
  pool.parallel_for(blocks, [&](int64_t begin, int64_t end) {
    std::vector<float> widened;
    std::vector<uint8_t> q(static_cast<size_t>(m.padded_cols()));
    std::vector<uint16_t> scales(static_cast<size_t>(groups));
    for (int64_t b = begin; b < end; ++b) {
      int8_t* block = m.q.data() + b * k4 * kInt8RowBlock * 4;
      float* block_scale = m.scale.data() + b * groups * kInt8RowBlock;
      int32_t* block_offset = m.offset.data() + b * groups * kInt8RowBlock;
      for (int64_t lane = 0; lane < kInt8RowBlock; ++lane) {
        const int64_t r = b * kInt8RowBlock + lane;
        std::fill(q.begin(), q.end(), uint8_t{0});
        std::fill(scales.begin(), scales.end(), uint16_t{0});
        if (r < w.rows) int8_row(w, r, widened, q.data(), scales.data());
        for (int64_t c = 0; c < m.padded_cols(); ++c)
          block[((c / 4) * kInt8RowBlock + lane) * 4 + c % 4] = static_cast<int8_t>(q[c]);
        for (int64_t g = 0; g < groups; ++g) {
          int32_t sum = 0;
          for (int64_t c = g * kQuantGroup; c < (g + 1) * kQuantGroup; ++c)
            sum += static_cast<int8_t>(q[c]);
          block_scale[g * kInt8RowBlock + lane] = f16_to_f32(scales[g]);
          block_offset[g * kInt8RowBlock + lane] = -128 * sum;
        }
      }
    }
  });
  return m;
}

Int8Activations quantize_activations(const float* x, int64_t n_tokens, int64_t cols,
                                     int64_t x_stride, uint8_t* q_out, float* scale_out,
                                     ThreadPool& pool) {
  Int8Activations a{n_tokens, cols, q_out, scale_out};
  const int64_t groups = a.groups(), padded = a.padded_cols();
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* row = x + t * x_stride;
      uint8_t* q = q_out + t * padded;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * kQuantGroup, c1 = std::min(cols, c0 + kQuantGroup);
        float amax = 0.0f;
        bool finite = true;
        for (int64_t c = c0; c < c1; ++c) {
          finite = finite && std::isfinite(row[c]);
          amax = std::max(amax, std::fabs(row[c]));
        }
        std::fill(q + c0, q + c0 + kQuantGroup, uint8_t{128});
        if (!finite) {
          scale_out[t * groups + g] = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        scale_out[t * groups + g] = amax / 127.0f;
        if (amax == 0.0f) continue;
        const float inv = 127.0f / amax;
        for (int64_t c = c0; c < c1; ++c) {
          const float v = std::clamp(std::nearbyint(row[c] * inv), -127.0f, 127.0f);
          q[c] = static_cast<uint8_t>(static_cast<int>(v) + 128);
        }
      }
    }
  });
  return a;
}

}  // namespace dsinfer
