#include "kernels/group_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"

namespace dsinfer {

const char* quant_format_name(QuantFormat format) {
  return format == QuantFormat::kInt4 ? "int4" : "int8";
}

uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (magnitude < 0x38800000u) {                        // below 2^-14: an fp16 subnormal (or 0)
    // the mantissa is value x 2^24 rounded to an integer (exact scaling, then nearest even)
    const float units = std::bit_cast<float>(magnitude) * 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(units));
  }
  const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
  return sign | static_cast<uint16_t>((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
}

// Compiled for several ISAs: the baseline x86-64 has no rounding instruction and called libm's
// nearbyint per weight (int8 mode quantizes every weight at load). IEEE division and rounding to
// nearest even give the same bits in every variant.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void quantize_row(
    QuantFormat format, const float* w, int64_t cols, uint8_t* out, uint16_t* scales) {
  const int qmax = format == QuantFormat::kInt4 ? 7 : 127;
  if (format == QuantFormat::kInt4)
    std::fill_n(out, quant_row_bytes(format, cols), uint8_t{0x88});  // q = 0
  for (int64_t g = 0; g < quant_groups(cols); ++g) {
    const int64_t begin = g * kQuantGroup, end = std::min(cols, begin + kQuantGroup);
    float amax = 0.0f;
    for (int64_t k = begin; k < end; ++k) {
      check(std::isfinite(w[k]), "quantize: weight ", k, " of a row is ", w[k], " (not finite)");
      amax = std::max(amax, std::fabs(w[k]));
    }
    const uint16_t scale_bits = f32_to_f16(amax / static_cast<float>(qmax));
    check((scale_bits & 0x7c00u) != 0x7c00u, "quantize: weight magnitude ", amax,
          " is too large for an fp16 scale");
    scales[g] = scale_bits;
    const float scale = f16_to_f32(scale_bits);
    for (int64_t k = begin; k < end; ++k) {
      const int q =
          scale == 0.0f
              ? 0
              : static_cast<int>(std::clamp(std::nearbyint(w[k] / scale), static_cast<float>(-qmax),
                                            static_cast<float>(qmax)));
      if (format == QuantFormat::kInt8) {
        out[k] = static_cast<uint8_t>(static_cast<int8_t>(q));
      } else {
        uint8_t& byte = out[int4_byte(k)];
        const uint8_t nibble = static_cast<uint8_t>(q + 8);
        byte = int4_high(k) ? static_cast<uint8_t>((byte & 0x0f) | (nibble << 4))
                            : static_cast<uint8_t>((byte & 0xf0) | nibble);
      }
    }
  }
}

void dequantize_quant_row(QuantFormat format, const uint8_t* row, const uint16_t* scales,
                          int64_t cols, float* out) {
  for (int64_t k = 0; k < cols; ++k) {
    const int q = format == QuantFormat::kInt4 ? int4_q(row, k) : static_cast<int8_t>(row[k]);
    out[k] = static_cast<float>(q) * f16_to_f32(scales[k / kQuantGroup]);
  }
}

}  // namespace dsinfer
