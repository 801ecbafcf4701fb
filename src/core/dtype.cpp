#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace dsinfer {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kF16, "F16", 2},   {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF64, "F64", 8},   {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},        {DType::kI16, "I16", 2},   {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},          {DType::kBool, "BOOL", 1},
};
static_assert(std::size(kDTypes) == static_cast<size_t>(DType::kCount));
}  // namespace

size_t dtype_size(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }
std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

DType parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  fail("unsupported tensor dtype \"", name, "\"");
}

float fp8_e4m3_to_f32_slow(uint8_t code) {
  const int sign = code >> 7;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  }
  return sign ? -magnitude : magnitude;
}

const float* fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int code = 0; code < 256; ++code)
      t[code] = fp8_e4m3_to_f32_slow(static_cast<uint8_t>(code));
    return t;
  }();
  return table.data();
}

float f16_to_f32(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 0x1f) {
    magnitude =
        mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
  }
  return sign ? -magnitude : magnitude;
}

namespace {

// first_non_finite over one element width: `bad(v)` for the element's bits. Blocks of 4096 are
// tested with an OR the compiler vectorizes; only a block that has one is searched again.
template <class Bits, class Bad>
int64_t first_bad(const void* data, int64_t n, Bad bad) {
  const Bits* v = static_cast<const Bits*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    bool any = false;
    for (int64_t i = start; i < end; ++i) any |= bad(v[i]);
    if (!any) continue;
    for (int64_t i = start; i < end; ++i)
      if (bad(v[i])) return i;
  }
  return -1;
}

}  // namespace

int64_t first_non_finite(DType dtype, const void* data, int64_t n) {
  switch (dtype) {
    case DType::kF8E4M3:
      return first_bad<uint8_t>(data, n, [](uint8_t b) { return (b & 0x7f) == 0x7f; });
    case DType::kBF16:
      return first_bad<uint16_t>(data, n, [](uint16_t b) { return (b & 0x7f80) == 0x7f80; });
    case DType::kF16:
      return first_bad<uint16_t>(data, n, [](uint16_t b) { return (b & 0x7c00) == 0x7c00; });
    case DType::kF32:
      return first_bad<uint32_t>(data, n,
                                 [](uint32_t b) { return (b & 0x7f800000u) == 0x7f800000u; });
    case DType::kF64:
      return first_bad<uint64_t>(
          data, n, [](uint64_t b) { return (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull; });
    default:
      return -1;
  }
}

}  // namespace dsinfer
