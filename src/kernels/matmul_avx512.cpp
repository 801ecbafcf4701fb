// AVX-512 matrix kernels (F, BW, VL): 16 floats a vector. Compiled with AVX-512 flags (see
// CMakeLists.txt); reached only through matmul_kernels() after a CPU check.
#include <immintrin.h>

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_ps() and then warn that
// it is uninitialized (a known false positive); nothing here reads an undefined value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/matmul_impl.h"

namespace dsinfer {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kGemmRows = 6;
  // rows per GEMV group: at most for 3-4 tokens (6 x 4 accumulators fit 32 zmm; GemvTuning picks
  // 4 or 6), at most for 1 token
  static constexpr int kGemvRowsManyTokens = isa_limits(Isa::kAvx512).gemv_max_rows_many;
  static constexpr int kGemvMaxRows = isa_limits(Isa::kAvx512).gemv_max_rows_one;
  static constexpr int kGemmVectors = 4;  // 6x4 accumulators + 4 token vectors + 1 broadcast
  static constexpr int kCombineSets = 4;  // combine_rows, many sets: 4x6 accumulators
  static constexpr int kCombineVectors = 6;
  static constexpr int kDotTokens = 4;  // dot_rows: 4x5 accumulators, 4 + 5 operands
  static constexpr int kDotRows = 5;
  static constexpr int kGemmChunkTiles = 2;      // token tiles whose lane partials stay in L2
  static constexpr int kGemmPanelColumns = 256;  // canonical GEMM panels (x 64 tokens: 64 KB)
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // lanes summed by halving (l + l+8, l + l+4, l + l+2, 0 + 1): the canonical order (matmul_impl.h)
  static float reduce(V v) {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  static V load_fp8(const uint8_t* p) {
    // sign-extended code << 7 puts the sign at bit 15 (and a copy at bit 14, cleared) and
    // exponent+mantissa at bits 7..13: the fp16 bit pattern of value / 256.
    const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i half =
        _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
    return _mm512_cvtph_ps(half);
  }
  // the code's sign to bit 31 and its other 7 bits to bits 20..26 (the sign-extended copies above
  // them masked off): value x 2^-120 as an fp32, exactly (matmul_impl.h)
  static constexpr bool kFp8Subnormal = isa_limits(Isa::kAvx512).fp8_subnormal;
  static V load_fp8_subnormal(const uint8_t* p) {
    const __m512i code = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(code, 20),
                                          _mm512_set1_epi32(static_cast<int>(0x87F00000u)));
    return _mm512_castsi512_ps(bits);
  }
  // GEMV fp8: widen 32 codes per instruction to fp16 patterns in L1, convert from memory.
  static constexpr bool kFp8ThroughL1 = true;
  static void fp8_to_half_2x(const uint8_t* p, uint16_t* out) {
    const __m512i wide =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i half =
        _mm512_and_si512(_mm512_slli_epi16(wide, 7), _mm512_set1_epi16(static_cast<short>(0xBF80)));
    _mm512_store_si512(out, half);
  }
  static V load_half(const uint16_t* p) {
    // from memory on purpose (an intrinsic would let the compiler forward the store through
    // a register shuffle, which is what the round trip avoids)
    V v;
    asm("vcvtph2ps %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const __m256i*>(p)));
    return v;
  }
  static V load_bf16(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // the 16 nibbles (low or high) of 16 bytes as q = nibble - 8 (kernels/group_quant.h)
  static V load_int4(const uint8_t* p, bool high) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (high) b = _mm512_srli_epi32(b, 4);
    b = _mm512_and_si512(b, _mm512_set1_epi32(15));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(b, _mm512_set1_epi32(8)));
  }
  static V load_int8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static float half(uint16_t bits) { return _cvtsh_ss(bits); }  // fp16 -> fp32, exact
  // int4 by table (the GEMV): the 16 values (n - 8) x scale for nibbles n = 0..15, exact ...
  static constexpr bool kInt4Table = true;
  static V int4_table(V scale) {
    return _mm512_mul_ps(_mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8),
                         scale);
  }
  // ... and 32 columns' values from their 16 bytes: VPERMPS reads only an index's low 4 bits, so
  // the low nibbles need no mask and the high ones one shift.
  static void int4_pair(const uint8_t* p, V table, V& lo, V& hi) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_permutexvar_ps(b, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), table);
  }
  static constexpr bool kInt4Widen = false;  // (AVX2's form: the table serves here)
  static void int4_block(const uint8_t*, V, V, V (&)[1]) {}
};

}  // namespace

const MatmulKernels& matmul_kernels_avx512() {
  static const MatmulKernels kernels{
      Isa::kAvx512,
      Gemm<Avx512>::packed_x_size,
      Gemm<Avx512>::pack_x,
      scratch_size_impl<Avx512>,
      matmul_rows_impl<Avx512>,
      /*row_grain=*/48,
      combine_rows_impl<Avx512>,
      dot_rows_impl<Avx512>,
  };
  return kernels;
}

}  // namespace dsinfer
