// AVX2 + FMA + F16C matrix kernels: 8 floats a vector. Compiled with AVX2 flags (see
// CMakeLists.txt); reached only through matmul_kernels() after a CPU check.
#include <immintrin.h>

#include "kernels/matmul_impl.h"

namespace dsinfer {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kGemmRows = 6;
  // rows per GEMV group for 3-4 tokens: 4 x 4 accumulators and the token vectors would spill 16 ymm
  static constexpr int kGemvRowsManyTokens = isa_limits(Isa::kAvx2).gemv_max_rows_many;
  static constexpr int kGemvMaxRows =
      isa_limits(Isa::kAvx2).gemv_max_rows_one;  // rows per GEMV group for 1 token
  static constexpr int kGemmVectors = 2;         // 6x2 accumulators + 2 token vectors + 1 broadcast
  static constexpr int kCombineSets = 4;         // combine_rows, many sets: 4x3 accumulators
  static constexpr int kCombineVectors = 3;
  static constexpr int kDotTokens = 2;  // dot_rows: 2x6 accumulators, 2 tokens + 1 row vector
  static constexpr int kDotRows = 6;
  static constexpr int kGemmChunkTiles = 8;  // token tiles whose lane partials stay in L2
  // canonical GEMM panels of 512 columns: 64 steps a call (256: 32) ran 5-10% faster on Zen 3
  static constexpr int kGemmPanelColumns = 512;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // lanes summed by halving (l + l+4, l + l+2, 0 + 1): the canonical order (matmul_impl.h)
  static float reduce(V v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
  static V load_fp8(const uint8_t* p) {
    // as in the AVX-512 variant: sign-extended code << 7, bit 14 cleared = fp16 of value / 256
    const __m128i wide = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i half =
        _mm_and_si128(_mm_slli_epi16(wide, 7), _mm_set1_epi16(static_cast<short>(0xBF80)));
    return _mm256_cvtph_ps(half);
  }
  // Zen 3 converts fp16 at one vector per two cycles (vcvtph2ps: 2 uops on its two convert
  // pipes): ~12 GB/s of fp8 a core, under the read bandwidth. The subnormal form is three integer
  // ops on any pipe; fp32 subnormal operands cost an FMA nothing there (a multiply they slow
  // down 1.5x, so the 2^112 goes to the activations instead).
  static constexpr bool kFp8Subnormal = isa_limits(Isa::kAvx2).fp8_subnormal;
  static V load_fp8_subnormal(const uint8_t* p) {
    const __m256i code = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i sign_and_rest = _mm256_and_si256(
        _mm256_slli_epi32(code, 20), _mm256_set1_epi32(static_cast<int>(0x87F00000u)));
    return _mm256_castsi256_ps(sign_and_rest);
  }
  // 16 ymm registers: the L1 round trip of the AVX-512 GEMV would spill; convert in registers.
  static constexpr bool kFp8ThroughL1 = false;
  static void fp8_to_half_2x(const uint8_t*, uint16_t*) {}
  static V load_half(const uint16_t*) { return zero(); }
  static V load_bf16(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // the 8 nibbles (low or high) of 8 bytes as q = nibble - 8 (kernels/group_quant.h)
  static V load_int4(const uint8_t* p, bool high) {
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    if (high) b = _mm256_srli_epi32(b, 4);
    b = _mm256_and_si256(b, _mm256_set1_epi32(15));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(b, _mm256_set1_epi32(8)));
  }
  static V load_int8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static float half(uint16_t bits) { return _cvtsh_ss(bits); }  // fp16 -> fp32, exact
  // (an 8-entry VPERMPS cannot hold the 16 int4 values: the GEMV widens them, int4_block)
  static constexpr bool kInt4Table = false;
  static V int4_table(V) { return zero(); }
  static void int4_pair(const uint8_t*, V, V&, V&) {}
  // One 16-byte int4 block (32 columns, kernels/group_quant.h) as w[0..3], columns 0-7, 8-15,
  // 16-23, 24-31, each (n - 8) x scale = fma(n, scale, -8 x scale), exact (an fp16 scale times an
  // integer below 16 fits fp32's mantissa). Each 8 bytes are widened once for their low and high
  // nibbles (the generic load widens them twice and takes 8 off in the integers).
  static constexpr bool kInt4Widen = true;
  static void int4_block(const uint8_t* p, V scale, V minus_8_scale, V (&w)[4]) {
    for (int half = 0; half < 2; ++half) {
      const __m256i bytes =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * half)));
      const __m256i low = _mm256_and_si256(bytes, _mm256_set1_epi32(15));
      const __m256i high = _mm256_srli_epi32(bytes, 4);
      w[half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low), scale, minus_8_scale);
      w[2 + half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(high), scale, minus_8_scale);
    }
  }
};

}  // namespace

const MatmulKernels& matmul_kernels_avx2() {
  static const MatmulKernels kernels{
      Isa::kAvx2,
      Gemm<Avx2>::packed_x_size,
      Gemm<Avx2>::pack_x,
      scratch_size_impl<Avx2>,
      matmul_rows_impl<Avx2>,
      /*row_grain=*/48,
      combine_rows_impl<Avx2>,
      dot_rows_impl<Avx2>,
  };
  return kernels;
}

}  // namespace dsinfer
