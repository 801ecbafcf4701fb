// int8 mode's kernel on AVX512-VNNI (Zen 4 / Zen 5, Intel since Cascade Lake): a tile of R row
// blocks (16 rows each, one zmm of lanes) by T tokens; each VPDPBUSD takes 4 columns of 16 rows
// (one 64-byte vector of the repacked matrix) against one token's 4 activation bytes broadcast.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul_int8.h"

namespace dsinfer {

namespace {

// acc += the 4-byte dot products of a (unsigned) and b (signed) per int32 lane. In asm: GCC 12
// copies every accumulator twice per _mm512_dpbusd_epi32 in these loops (its tied operand), 24
// moves per 12 products, which made the kernel front-end bound.
inline void dpbusd(__m512i& acc, __m512i a, __m512i b) {
  asm("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
}

// One token's 4 activation bytes at column 4 j, in every lane.
inline __m512i broadcast4(const uint8_t* q, int64_t j) {
  int32_t four;
  std::memcpy(&four, q + j * 4, 4);
  return _mm512_set1_epi32(four);
}

// Int4: the weights hold 8 columns a vector (int8_matrix.h): the low nibbles (minus 8) are the
// int8 layout's vector for columns 4 j, the high ones for 4 j + 4.
template <int R, int T, bool Int4>
void tile(const Int8Activations& x, int64_t t0, const Int8Matrix& w, int64_t b0, float* y,
          int64_t y_stride) {
  const int64_t groups = w.groups(), padded = w.padded_cols();
  const int8_t* wq[R];
  for (int r = 0; r < R; ++r) wq[r] = w.q.data() + (b0 + r) * w.block_bytes();
  const __m512i nibble = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
  const uint8_t* xq[T];
  for (int t = 0; t < T; ++t) xq[t] = x.q + (t0 + t) * padded;
  // the fp32 sums live in memory (touched once a group): the registers hold the int32 ones
  alignas(64) float acc[R][T][kInt8RowBlock] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m512i sum[R][T];
    for (int r = 0; r < R; ++r) {
      const __m256i q_sum = _mm256_load_si256(reinterpret_cast<const __m256i*>(
          w.q_sum.data() + ((b0 + r) * groups + g) * kInt8RowBlock));
      const __m512i offset =  // -128 x sum(q)
          _mm512_sub_epi32(_mm512_setzero_si512(),
                           _mm512_slli_epi32(_mm512_cvtepi16_epi32(q_sum), 7));
      for (int t = 0; t < T; ++t) sum[r][t] = offset;
    }
    if constexpr (Int4) {
      for (int64_t j = g * (kQuantGroup / 4); j < (g + 1) * (kQuantGroup / 4); j += 2) {
        __m512i low[R], high[R];
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_load_si512(wq[r] + j * 32);
          low[r] = _mm512_sub_epi8(_mm512_and_si512(v, nibble), eight);
          high[r] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), eight);
        }
        for (int t = 0; t < T; ++t) {
          const __m512i x0 = broadcast4(xq[t], j), x1 = broadcast4(xq[t], j + 1);
          for (int r = 0; r < R; ++r) {
            dpbusd(sum[r][t], x0, low[r]);
            dpbusd(sum[r][t], x1, high[r]);
          }
        }
      }
    } else {
      for (int64_t j = g * (kQuantGroup / 4); j < (g + 1) * (kQuantGroup / 4); ++j) {
        __m512i wv[R];
        for (int r = 0; r < R; ++r) wv[r] = _mm512_load_si512(wq[r] + j * 64);
        for (int t = 0; t < T; ++t) {
          const __m512i xb = broadcast4(xq[t], j);
          for (int r = 0; r < R; ++r) dpbusd(sum[r][t], xb, wv[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 sw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(
          w.scale.data() + ((b0 + r) * groups + g) * kInt8RowBlock)));
      for (int t = 0; t < T; ++t) {
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(x.scale[(t0 + t) * groups + g]), sw);
        const __m512 sums = _mm512_cvtepi32_ps(sum[r][t]);
        _mm512_store_ps(acc[r][t], _mm512_fmadd_ps(sums, s, _mm512_load_ps(acc[r][t])));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = (b0 + r) * kInt8RowBlock;
    const int64_t live = std::min<int64_t>(kInt8RowBlock, w.rows - row);
    const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1u);
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + row, mask, _mm512_load_ps(acc[r][t]));
  }
}

using TileFn = void (*)(const Int8Activations&, int64_t, const Int8Matrix&, int64_t, float*,
                        int64_t);
constexpr int kMaxTokens = 6;
// [int4][R - 1][T - 1] for R = 1, 2; 4 row blocks only for 1-2 tokens
template <bool Int4>
struct Tiles {
  static constexpr TileFn narrow[2][kMaxTokens] = {
      {tile<1, 1, Int4>, tile<1, 2, Int4>, tile<1, 3, Int4>, tile<1, 4, Int4>, tile<1, 5, Int4>,
       tile<1, 6, Int4>},
      {tile<2, 1, Int4>, tile<2, 2, Int4>, tile<2, 3, Int4>, tile<2, 4, Int4>, tile<2, 5, Int4>,
       tile<2, 6, Int4>},
  };
  static constexpr TileFn wide[2] = {tile<4, 1, Int4>, tile<4, 2, Int4>};
};

template <bool Int4>
void blocks(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin, int64_t block_end,
            float* y, int64_t y_stride) {
  // Few tokens (decode) take 4 row blocks a tile, more tokens 2 blocks by 6 tokens: at most 12
  // accumulators beside the weight vectors, in 32 registers.
  const int wide = x.n_tokens <= 2 ? 4 : 2;
  int64_t b = block_begin;
  while (b < block_end) {
    const int r = block_end - b >= wide ? wide : 1;
    for (int64_t t = 0; t < x.n_tokens; t += kMaxTokens) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxTokens, x.n_tokens - t));
      const TileFn fn = r == 4 ? Tiles<Int4>::wide[n - 1] : Tiles<Int4>::narrow[r - 1][n - 1];
      fn(x, t, w, b, y, y_stride);
    }
    b += r;
  }
}

}  // namespace

void int8_blocks_avx512vnni(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                            int64_t block_end, float* y, int64_t y_stride) {
  check(x.bytes == Int8Bytes::kBiased, "int8_blocks_avx512vnni reads biased activation bytes");
  if (w.int4) return blocks<true>(x, w, block_begin, block_end, y, y_stride);
  blocks<false>(x, w, block_begin, block_end, y, y_stride);
}

}  // namespace dsinfer
