// int8 mode's kernel on AVX512-VNNI (Zen 4 / Zen 5, Intel since Cascade Lake): a tile of R row
// blocks (16 rows each, one zmm of lanes) by T tokens; each VPDPBUSD takes 4 columns of 16 rows
// (one 64-byte vector of the repacked matrix) against one token's 4 activation bytes broadcast.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_int8.h"

namespace dsinfer {

namespace {

// acc += the 4-byte dot products of a (unsigned) and b (signed) per int32 lane. In asm: GCC 12
// copies every accumulator twice per _mm512_dpbusd_epi32 in these loops (its tied operand), 24
// moves per 12 products, which made the kernel front-end bound.
inline void dpbusd(__m512i& acc, __m512i a, __m512i b) {
  asm("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
}

template <int R, int T>
void tile(const Int8Activations& x, int64_t t0, const Int8Matrix& w, int64_t b0, float* y,
          int64_t y_stride) {
  const int64_t groups = w.groups(), k4 = w.padded_cols() / 4, padded = w.padded_cols();
  const int8_t* wq[R];
  for (int r = 0; r < R; ++r) wq[r] = w.q.data() + (b0 + r) * k4 * 64;
  const uint8_t* xq[T];
  for (int t = 0; t < T; ++t) xq[t] = x.q + (t0 + t) * padded;
  // the fp32 sums live in memory (touched once a group): the registers hold the int32 ones
  alignas(64) float acc[R][T][kInt8RowBlock] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m512i sum[R][T];
    for (int r = 0; r < R; ++r) {
      const __m512i offset =
          _mm512_load_si512(w.offset.data() + ((b0 + r) * groups + g) * kInt8RowBlock);
      for (int t = 0; t < T; ++t) sum[r][t] = offset;
    }
    for (int64_t j = g * (kQuantGroup / 4); j < (g + 1) * (kQuantGroup / 4); ++j) {
      __m512i wv[R];
      for (int r = 0; r < R; ++r) wv[r] = _mm512_load_si512(wq[r] + j * 64);
      for (int t = 0; t < T; ++t) {
        int32_t four;
        std::memcpy(&four, xq[t] + j * 4, 4);
        const __m512i xb = _mm512_set1_epi32(four);
        for (int r = 0; r < R; ++r) dpbusd(sum[r][t], xb, wv[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 sw = _mm512_load_ps(w.scale.data() + ((b0 + r) * groups + g) * kInt8RowBlock);
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
// [R - 1][T - 1] for R = 1, 2; 4 row blocks only for 1-2 tokens
constexpr TileFn kTiles[2][kMaxTokens] = {
    {tile<1, 1>, tile<1, 2>, tile<1, 3>, tile<1, 4>, tile<1, 5>, tile<1, 6>},
    {tile<2, 1>, tile<2, 2>, tile<2, 3>, tile<2, 4>, tile<2, 5>, tile<2, 6>},
};
constexpr TileFn kWideTiles[2] = {tile<4, 1>, tile<4, 2>};

}  // namespace

void int8_blocks_avx512vnni(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                            int64_t block_end, float* y, int64_t y_stride) {
  // Few tokens (decode) take 4 row blocks a tile, more tokens 2 blocks by 6 tokens: at most 12
  // accumulators of each kind beside the weight vectors, in 32 registers.
  const int wide = x.n_tokens <= 2 ? 4 : 2;
  int64_t b = block_begin;
  while (b < block_end) {
    const int r = block_end - b >= wide ? wide : 1;
    for (int64_t t = 0; t < x.n_tokens; t += kMaxTokens) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxTokens, x.n_tokens - t));
      const TileFn fn = r == 4 ? kWideTiles[n - 1] : kTiles[r - 1][n - 1];
      fn(x, t, w, b, y, y_stride);
    }
    b += r;
  }
}

}  // namespace dsinfer
