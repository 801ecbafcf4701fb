// The group-scaled integer weight formats (convert --experts-int4, --int8): symmetric integers
// with one fp16 scale per row per group of kQuantGroup columns (the last group of a row may be
// shorter; a row narrower than a group is one group). A weight is q x scale, exactly: q has at most
// 8 significant bits and an fp16 scale 11, so every product is an fp32 number and dequantizing it
// in fp32 loses nothing (the kernels can keep the canonical order over exact weights).
//
// int4 (stored as safetensors U8): q in [-7, 7] (-8 is never written), as the nibble q + 8. Each
//   row is kInt4Block-column blocks of 16 bytes, byte j of block b holding column 32 b + j in its
//   low nibble and column 32 b + 16 + j in its high one; the row is padded to whole blocks with
//   q = 0. So 16 consecutive columns are the low or high nibbles of 16 consecutive bytes: one
//   byte widening and a shift give a vector of them.
// int8 (stored as safetensors I8): q in [-127, 127], one byte per column, no padding.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dsinfer {

constexpr int64_t kQuantGroup = 128;  // columns per scale (the fp8 block's width)
constexpr int64_t kInt4Block = 32;    // columns per 16 bytes of int4
constexpr DType kInt4Storage = DType::kU8;
constexpr DType kInt8Storage = DType::kI8;

enum class QuantFormat { kInt4, kInt8 };
const char* quant_format_name(QuantFormat format);  // "int4" | "int8"

// Bytes of one stored row of `cols` columns.
inline int64_t quant_row_bytes(QuantFormat format, int64_t cols) {
  return format == QuantFormat::kInt4 ? ceil_div(cols, kInt4Block) * (kInt4Block / 2) : cols;
}
inline int64_t quant_groups(int64_t cols) { return ceil_div(cols, kQuantGroup); }

// Where column k of an int4 row lies: byte int4_byte(k), high nibble when int4_high(k).
inline int64_t int4_byte(int64_t k) {
  return (k / kInt4Block) * (kInt4Block / 2) + k % (kInt4Block / 2);
}
inline bool int4_high(int64_t k) { return k % kInt4Block >= kInt4Block / 2; }
inline int int4_q(const uint8_t* row, int64_t k) {
  const uint8_t byte = row[int4_byte(k)];
  return (int4_high(k) ? byte >> 4 : byte & 15) - 8;
}

// One row of fp32 weights w[cols] rounded to nearest: per group, scale = fp16(max |w| / qmax)
// (qmax 7 or 127), q = round(w / scale) clamped to [-qmax, qmax] (all zero when the group is).
// Writes quant_row_bytes(format, cols) bytes to `out` and quant_groups(cols) fp16 scales to
// `scales`. Throws Error when a weight is not finite or too large for an fp16 scale.
void quantize_row(QuantFormat format, const float* w, int64_t cols, uint8_t* out, uint16_t* scales);

// The exact fp32 value q x scale of every column of one stored row (the oracle of the kernels).
void dequantize_quant_row(QuantFormat format, const uint8_t* row, const uint16_t* scales,
                          int64_t cols, float* out);

// fp32 -> fp16 bits, round to nearest even, saturating nothing: values past the fp16 range give
// infinity (quantize_row refuses those before).
uint16_t f32_to_f16(float value);

}  // namespace dsinfer
