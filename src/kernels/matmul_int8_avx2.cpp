// int8 mode's kernel on AVX2 (Zen 3 and every x86-64-v3 CPU): a tile of one row block (two ymm
// halves of 8 rows) by T tokens. VPMADDUBSW multiplies unsigned by signed bytes, so int8 weights
// enter as |qw| (taken once per vector for all T tokens) and each token's 4 activation bytes,
// broadcast, take qw's sign (VPSIGNB); pairs of products sum in int16 without saturating (at
// most 2 x 127 x 127 = 32258), VPMADDWD widens them to int32. The activations come as signed
// bytes (Int8Bytes::kSigned): a bias removed in this loop cost a third of the kernel's speed.
// int4 weights need no sign step: their stored nibbles qw + 8 are unsigned already (below).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/matmul_int8.h"

namespace dsinfer {

namespace {

// sum[0..1][t] += token t's 4 bytes at column 4 j times the two halves' weight vectors w0, w1
// (given with their magnitudes m0, m1).
template <int T>
inline void accumulate(__m256i (&sum)[2][T], const int8_t* const (&xq)[T], int64_t j, __m256i w0,
                       __m256i w1, __m256i m0, __m256i m1) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < T; ++t) {
    int32_t four;
    std::memcpy(&four, xq[t] + j * 4, 4);
    const __m256i x = _mm256_set1_epi32(four);
    const __m256i p0 = _mm256_maddubs_epi16(m0, _mm256_sign_epi8(x, w0));
    const __m256i p1 = _mm256_maddubs_epi16(m1, _mm256_sign_epi8(x, w1));
    sum[0][t] = _mm256_add_epi32(sum[0][t], _mm256_madd_epi16(p0, ones));
    sum[1][t] = _mm256_add_epi32(sum[1][t], _mm256_madd_epi16(p1, ones));
  }
}

// Weight bytes ahead of the loads that each iteration prefetches: a row block's weights are one
// contiguous stream, which the hardware prefetcher alone followed too late on Zen 3 (int4 experts
// from memory, 1 and 4 tokens, streamed ~1.2-1.4x faster with it; bench/README.md).
constexpr int64_t kPrefetchAhead = 2048;

// The activations as the tiles read them: q and scales, and for int4 matrices each token's
// group sums of q.
struct Tokens {
  const Int8Activations& x;
  const int32_t* q_sums;  // [n_tokens][groups]: sum of the group's q (int4 matrices only)
};

// Group g's int32 sums S scaled into acc (fp32, in memory: touched once a group, while the
// registers hold the int32 sums): acc = fma(float(S), sx * sw, acc).
template <int T>
inline void scale_group(const Tokens& tokens, int64_t t0, const uint16_t* sw, int64_t g,
                        const __m256i (&sum)[2][T], float (&acc)[2][T][8]) {
  const int64_t groups = tokens.x.groups();
  for (int h = 0; h < 2; ++h) {
    const __m256 sw_half =
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sw + 8 * h)));
    for (int t = 0; t < T; ++t) {
      const __m256 s =
          _mm256_mul_ps(_mm256_set1_ps(tokens.x.scale[(t0 + t) * groups + g]), sw_half);
      _mm256_store_ps(acc[h][t],
                      _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[h][t]), s, _mm256_load_ps(acc[h][t])));
    }
  }
}

// Group g's exact int32 sums of int4 weights: 8 columns a 64-byte vector, the low nibbles are
// columns 4 j.., the high 4 j + 4.. (int8_matrix.h), each nibble n = qw + 8. VPMADDUBSW takes n as
// the unsigned operand and the signed activations as they are: a pair sums to at most 2 x 15 x
// 127 = 3810 and a low and a high pair together to 7620, so int16 never saturates; sum(n x qx) -
// 8 x sum(qx) is then sum(qw x qx), the same integer the other kernels make. Per 128 weights and
// token: 4 multiplies, 2 adds in int16, 2 widenings, 2 adds (the sign step took 4 more and 4 abs
// per 128 weights besides).
template <int T>
inline void int4_group_sums(const Tokens& tokens, const int8_t* const (&xq)[T], int64_t t0,
                            const int8_t* wq, int64_t g, __m256i (&sum)[2][T]) {
  const __m256i nibble = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const int64_t groups = tokens.x.groups();
  for (int t = 0; t < T; ++t)
    sum[0][t] = sum[1][t] = _mm256_set1_epi32(-8 * tokens.q_sums[(t0 + t) * groups + g]);
  for (int64_t j = g * (kQuantGroup / 4); j < (g + 1) * (kQuantGroup / 4); j += 2) {
    __builtin_prefetch(wq + j * 32 + kPrefetchAhead, 0, 0);
    const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wq + j * 32));
    const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wq + j * 32 + 32));
    const __m256i low0 = _mm256_and_si256(v0, nibble), low1 = _mm256_and_si256(v1, nibble);
    const __m256i high0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), nibble);
    const __m256i high1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), nibble);
    for (int t = 0; t < T; ++t) {
      int32_t four_low, four_high;
      std::memcpy(&four_low, xq[t] + j * 4, 4);
      std::memcpy(&four_high, xq[t] + j * 4 + 4, 4);
      const __m256i xl = _mm256_set1_epi32(four_low), xh = _mm256_set1_epi32(four_high);
      const __m256i p0 =
          _mm256_add_epi16(_mm256_maddubs_epi16(low0, xl), _mm256_maddubs_epi16(high0, xh));
      const __m256i p1 =
          _mm256_add_epi16(_mm256_maddubs_epi16(low1, xl), _mm256_maddubs_epi16(high1, xh));
      sum[0][t] = _mm256_add_epi32(sum[0][t], _mm256_madd_epi16(p0, ones));
      sum[1][t] = _mm256_add_epi32(sum[1][t], _mm256_madd_epi16(p1, ones));
    }
  }
}

// Group g's exact int32 sums of int8 weights (4 columns a 64-byte vector).
template <int T>
inline void int8_group_sums(const int8_t* const (&xq)[T], const int8_t* wq, int64_t g,
                            __m256i (&sum)[2][T]) {
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < T; ++t) sum[h][t] = _mm256_setzero_si256();
  for (int64_t j = g * (kQuantGroup / 4); j < (g + 1) * (kQuantGroup / 4); ++j) {
    __builtin_prefetch(wq + j * 64 + kPrefetchAhead, 0, 0);
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wq + j * 64));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wq + j * 64 + 32));
    accumulate<T>(sum, xq, j, w0, w1, _mm256_abs_epi8(w0), _mm256_abs_epi8(w1));
  }
}

template <int T, bool Int4>
void tile(const Tokens& tokens, int64_t t0, const Int8Matrix& w, int64_t b, float* y,
          int64_t y_stride) {
  const Int8Activations& x = tokens.x;
  const int64_t groups = w.groups(), padded = w.padded_cols();
  const int8_t* wq = w.q.data() + b * w.block_bytes();
  const int8_t* xq[T];
  for (int t = 0; t < T; ++t) xq[t] = reinterpret_cast<const int8_t*>(x.q) + (t0 + t) * padded;
  alignas(32) float acc[2][T][8] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m256i sum[2][T];
    if constexpr (Int4)
      int4_group_sums<T>(tokens, xq, t0, wq, g, sum);
    else
      int8_group_sums<T>(xq, wq, g, sum);
    scale_group<T>(tokens, t0, w.scale.data() + (b * groups + g) * kInt8RowBlock, g, sum, acc);
  }
  const int64_t row = b * kInt8RowBlock;
  const int64_t live = std::min<int64_t>(kInt8RowBlock, w.rows - row);
  for (int t = 0; t < T; ++t) {
    float* out = y + (t0 + t) * y_stride + row;
    std::copy_n(acc[0][t], std::min<int64_t>(live, 8), out);
    if (live > 8) std::copy_n(acc[1][t], live - 8, out + 8);
  }
}

// q_sums [n_tokens][groups] of the signed activation bytes (padding holds 0).
void group_sums(const Int8Activations& x, std::vector<int32_t>& q_sums) {
  const int64_t groups = x.groups();
  q_sums.resize(static_cast<size_t>(x.n_tokens * groups));
  const int8_t* q = reinterpret_cast<const int8_t*>(x.q);
  for (int64_t i = 0; i < x.n_tokens * groups; ++i) {
    int32_t s = 0;
    for (int64_t c = 0; c < kQuantGroup; ++c) s += q[i * kQuantGroup + c];
    q_sums[static_cast<size_t>(i)] = s;
  }
}

// 4 tokens a tile: each weight vector's magnitude and load serve 4 tokens, and the 8 int32 sums
// still fit the 16 registers beside the weights (3 tokens measured as fast, 2 a fifth slower).
constexpr int kMaxTokens = 4;
using TileFn = void (*)(const Tokens&, int64_t, const Int8Matrix&, int64_t, float*, int64_t);
constexpr TileFn kTiles[2][kMaxTokens] = {
    {tile<1, false>, tile<2, false>, tile<3, false>, tile<4, false>},
    {tile<1, true>, tile<2, true>, tile<3, true>, tile<4, true>}};

}  // namespace

void int8_blocks_avx2(const Int8Activations& x, const Int8Matrix& w, int64_t block_begin,
                      int64_t block_end, float* y, int64_t y_stride) {
  check(x.bytes == Int8Bytes::kSigned, "int8_blocks_avx2 reads signed activation bytes");
  // (each thread sums the tokens' groups once a call: n_tokens x cols byte adds, under 1% of the
  // products of the smallest matrix's share)
  thread_local std::vector<int32_t> q_sums;
  if (w.int4) group_sums(x, q_sums);
  const Tokens tokens{x, q_sums.data()};
  for (int64_t b = block_begin; b < block_end; ++b)
    for (int64_t t = 0; t < x.n_tokens; t += kMaxTokens) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxTokens, x.n_tokens - t));
      kTiles[w.int4][n - 1](tokens, t, w, b, y, y_stride);
    }
}

}  // namespace dsinfer
