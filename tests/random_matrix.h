// A random weight matrix of any format the kernels read, with the values they multiply: for the
// kernel tests (canonical_order_test, op_harness_test).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/group_quant.h"
#include "kernels/weight_matrix.h"

namespace dsinfer::test {

// A random matrix of one dtype (fp8 with distinct, non-power-of-two block scales).
struct RandomMatrix {
  WeightMatrix w;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<uint16_t> group_scales;  // int4 / int8: quantize_row's fp16 scales
  std::vector<float> values;           // int4 / int8: [rows, cols] q x scale (dequantize_quant_row)

  RandomMatrix(const RandomMatrix&) = delete;  // w points into this object's vectors
  RandomMatrix& operator=(const RandomMatrix&) = delete;
  RandomMatrix(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
    w = {dtype, rows, cols, nullptr, nullptr};
    if (w.group_scaled()) {
      std::normal_distribution<float> normal(0.0f, 0.5f);
      bytes.resize(static_cast<size_t>(rows * w.row_stride()));
      group_scales.resize(static_cast<size_t>(rows * quant_groups(cols)));
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = normal(rng);
        quantize_row(w.quant_format(), row.data(), cols,
                     &bytes[static_cast<size_t>(r * w.row_stride())],
                     &group_scales[static_cast<size_t>(r * quant_groups(cols))]);
      }
      values.resize(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        dequantize_quant_row(w.quant_format(), &bytes[static_cast<size_t>(r * w.row_stride())],
                             &group_scales[static_cast<size_t>(r * quant_groups(cols))], cols,
                             &values[static_cast<size_t>(r * cols)]);
      w.data = bytes.data();
      w.group_scale = group_scales.data();
      return;
    }
    bytes.resize(static_cast<size_t>(rows * cols) * dtype_size(dtype));
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (size_t i = 0; i < static_cast<size_t>(rows * cols); ++i) {
      if (dtype == DType::kF32) {
        const float v = normal(rng);
        std::memcpy(&bytes[i * 4], &v, 4);
      } else if (dtype == DType::kBF16) {
        const uint16_t b = f32_to_bf16(normal(rng));
        std::memcpy(&bytes[i * 2], &b, 2);
      } else {
        uint8_t b;
        do b = static_cast<uint8_t>(rng());
        while ((b & 0x7f) == 0x7f);  // no NaN codes
        bytes[i] = b;
      }
    }
    if (dtype == DType::kF8E4M3) {
      scales.resize(static_cast<size_t>(ceil_div(rows, kFp8Block) * ceil_div(cols, kFp8Block)));
      for (float& s : scales) s = std::uniform_real_distribution<float>(1e-4f, 3e-2f)(rng);
      w.scale = scales.data();
    }
    w.data = bytes.data();
  }

  // The weight as the kernels multiply it (fp8: the code's value / 256, exact; int4, int8: q x
  // scale, exact) ...
  float weight(int64_t r, int64_t k) const {
    if (w.group_scaled()) return values[static_cast<size_t>(r * w.cols + k)];
    const size_t i = static_cast<size_t>(r * w.cols + k);
    if (w.dtype == DType::kF32) {
      float v;
      std::memcpy(&v, &bytes[i * 4], 4);
      return v;
    }
    if (w.dtype == DType::kBF16) {
      uint16_t b;
      std::memcpy(&b, &bytes[i * 2], 2);
      return bf16_to_f32(b);
    }
    return fp8_e4m3_to_f32(bytes[i]) / 256.0f;
  }
  // ... and what the activation at column k is multiplied by first (fp8: block scale * 256).
  float x_factor(int64_t r, int64_t k) const {
    if (w.dtype != DType::kF8E4M3) return 1.0f;
    return scales[static_cast<size_t>((r / kFp8Block) * w.scale_cols() + k / kFp8Block)] * 256.0f;
  }
};

}  // namespace dsinfer::test
