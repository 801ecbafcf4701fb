// int8 mode (KernelConfig::act kInt8, `--act-dtype int8`): products on integer dot instructions.
// Weights are int8 with one scale per row per 128 columns (group_quant.h's int8: from a shard
// converted with --int8, or quantized at load from the exactly dequantized fp8 / bf16 weights,
// which gives the same q and scales convert --int8 would write). Activations are quantized the
// same way per token: per 128 columns, scale sx = amax / 127 and q = nearbyint(x * (127 / amax))
// (round to nearest even), clamped to [-127, 127]. A product is then
//   y[t, r] = fold over groups g = 0, 1, ... of  acc = fma(float(S_g), sx[t, g] * sw[r, g], acc)
// from acc = 0, where S_g = sum over the group's columns of qx * qw is an exact int32 (at most
// 128 x 127 x 127 in magnitude, so float(S_g) is exact too). Every kernel (scalar, AVX2,
// AVX512-VNNI) computes exactly this: int8 mode gives the same bits on every CPU, at every token
// count and thread count (batch invariant by construction, tests/int8_matmul_test.cpp).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/dtype.h"
#include "core/mat_view.h"
#include "core/thread_pool.h"
#include "kernels/group_quant.h"

namespace dsinfer {

struct WeightMatrix;

constexpr int64_t kInt8RowBlock = 16;  // rows interleaved together: one 512-bit vector of lanes

// An array on its own 64-byte lines (the kernels' vector loads never straddle two).
template <class T>
class AlignedArray {
 public:
  AlignedArray() = default;
  explicit AlignedArray(int64_t n)
      : data_(static_cast<T*>(
            std::aligned_alloc(64, ceil_div(n * static_cast<int64_t>(sizeof(T)), 64) * 64))),
        size_(n) {
    if (n > 0 && data_ == nullptr) throw std::bad_alloc();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  int64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  int64_t size_ = 0;
};

// A weight matrix [rows, cols] repacked for int8 mode's kernels: rows in blocks of 16, each
// block's 4 consecutive columns of its 16 rows one 64-byte vector, columns padded with q = 0 to
// whole groups and rows with zero rows to whole blocks. int4 weights (convert --experts-int4)
// keep 4 bits: one 64-byte vector holds 8 columns, byte j of row l's 4 bytes holding column
// 8 m + j in its low nibble and 8 m + 4 + j in its high one (q + 8), so a mask and a shift give
// the int8 layout's two vectors.
struct Int8Matrix {
  int64_t rows = 0, cols = 0;
  bool int4 = false;
  // int8: [row_blocks][padded_cols / 4][16 rows][4 columns]; int4: [row_blocks][padded_cols / 8]
  // [16 rows][4 bytes]
  AlignedArray<int8_t> q;
  // [row_blocks][groups][16 rows]: sw, each row's group scale (fp16 bits: half the bytes of
  // fp32 for decode to stream; the kernels widen them exactly)
  AlignedArray<uint16_t> scale;
  // [row_blocks][groups][16 rows]: the sum of the group's q (|sum| <= 128 x 127 fits int16);
  // -128 x it corrects the sums of kernels whose activations enter as unsigned bytes q + 128
  // (VPDPBUSD's u8 x s8)
  AlignedArray<int16_t> q_sum;

  int64_t row_blocks() const { return ceil_div(rows, kInt8RowBlock); }
  int64_t groups() const { return quant_groups(cols); }
  int64_t padded_cols() const { return groups() * kQuantGroup; }
  // Bytes of one row block's q.
  int64_t block_bytes() const { return kInt8RowBlock * padded_cols() / (int4 ? 2 : 1); }
  // The stored q of row r, column c (the kernels' oracle reads it this way).
  int8_t at(int64_t r, int64_t c) const {
    const int64_t columns_per_vector = int4 ? 8 : 4;
    const int8_t byte =
        q.data()[r / kInt8RowBlock * block_bytes() +
                 ((c / columns_per_vector) * kInt8RowBlock + r % kInt8RowBlock) * 4 + c % 4];
    if (!int4) return byte;
    const int nibble = c % 8 >= 4 ? (static_cast<uint8_t>(byte) >> 4) : (byte & 15);
    return static_cast<int8_t>(nibble - 8);
  }
  float row_scale(int64_t r, int64_t g) const {
    return f16_to_f32(
        scale.data()[(r / kInt8RowBlock * groups() + g) * kInt8RowBlock + r % kInt8RowBlock]);
  }
  // Bytes the kernels read for one pass over the matrix.
  int64_t bytes() const { return row_blocks() * (block_bytes() + kInt8RowBlock * groups() * 4); }
};

// Whether int8 mode repacks a matrix of this format: fp8, bf16, int8 and int4 (f32 matrices, the
// router's, stay exact).
bool int8_repackable(const WeightMatrix& w);
// w repacked: int8 and int4 rows copied as they are (int4 into the 4-bit form); fp8 and bf16 rows
// dequantized exactly and quantized as convert --int8 does (quantize_row). Rows split across the
// pool. Throws Error for a weight quantize_row refuses (not finite, too large for an fp16 scale).
Int8Matrix repack_int8(const WeightMatrix& w, ThreadPool& pool);

// How a kernel takes the activations' q: as q + 128 in unsigned bytes (VPDPBUSD's u8 operand,
// corrected by the matrix's q_sum), or as signed bytes (AVX2's VPSIGNB + VPMADDUBSW).
enum class Int8Bytes { kBiased, kSigned };

// Activations [n_tokens, cols] quantized for the kernels.
struct Int8Activations {
  int64_t n_tokens = 0, cols = 0;
  Int8Bytes bytes = Int8Bytes::kBiased;
  // [n_tokens][padded_cols]: q + 128 (128 in the padding) when biased, else q's int8 bits (0 in
  // the padding)
  const uint8_t* q = nullptr;
  const float* scale = nullptr;  // [n_tokens][groups]: sx (0 for a group of zeros; NaN when
                                 // the group holds a NaN or an infinity, so the outputs are NaN)
  int64_t groups() const { return quant_groups(cols); }
  int64_t padded_cols() const { return groups() * kQuantGroup; }
};

// Bytes of q and floats of scale that quantize_activations writes.
inline int64_t int8_activation_bytes(int64_t n_tokens, int64_t cols) {
  return n_tokens * quant_groups(cols) * kQuantGroup;
}
inline int64_t int8_activation_scales(int64_t n_tokens, int64_t cols) {
  return n_tokens * quant_groups(cols);
}
// x [n_tokens, cols] into q_out and scale_out in the form `bytes`, tokens split across the pool.
Int8Activations quantize_activations(ConstMatView x, Int8Bytes bytes, uint8_t* q_out,
                                     float* scale_out, ThreadPool& pool);

}  // namespace dsinfer
