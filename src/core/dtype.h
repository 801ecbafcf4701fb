// Element types found in DeepSeek checkpoints and their conversions to float.
// fp8 here is always float8 e4m3fn (no infinities; 0x7f/0xff are NaN; max 448), as in V3.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsinfer {

enum class DType { kF32, kF16, kBF16, kF8E4M3, kF64, kI64, kI32, kI16, kI8, kU8, kBool, kCount };

size_t dtype_size(DType dtype);
// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
// Throws Error for a spelling safetensors does not define.
DType parse_dtype(std::string_view name);

inline float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest, ties to even, as torch's float->bfloat16 cast; NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Exact value of an e4m3fn code, computed from its fields (the oracle for the table below).
float fp8_e4m3_to_f32_slow(uint8_t code);

// The 256 decoded values; fp8_e4m3_table()[code] == fp8_e4m3_to_f32_slow(code).
const float* fp8_e4m3_table();
inline float fp8_e4m3_to_f32(uint8_t code) { return fp8_e4m3_table()[code]; }

float f16_to_f32(uint16_t bits);

// fp8 weights carry one float scale per kFp8Block x kFp8Block block of the matrix.
constexpr int kFp8Block = 128;
// The index of the first element of data[n] that is not a finite number (NaN or an infinity; for
// fp8 e4m3fn the NaN codes 0x7f and 0xff), or -1; integer types are always finite. One pass that
// the compiler vectorizes: it runs over every weight at load.
int64_t first_non_finite(DType dtype, const void* data, int64_t n);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace dsinfer
