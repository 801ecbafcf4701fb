// VDPBF16PS GEMV of fast mode for few tokens (decode batches; matmul_bf16dot.h, compiled with
// AVX-512 flags, reached only where the CPU runs the AVX-512 kernels). Each weight pair vector is
// converted once and multiplied with every token's pairs (tokens in the accumulators' second
// index, not in lanes), one VDPBF16PS per token and 32 weights where the exact kernels' fp32 FMAs
// need two. Columns go in panels so that the tokens' part stays in L1 while the rows pass. The
// numbers: each 128-column block summed in registers from zero, times its scale, added in fp32.
#include <immintrin.h>

#include "kernels/matmul_bf16dot.h"
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/aligned_buffer.h"
#include "kernels/weights_to_bf16_avx512.h"

namespace dsinfer {
namespace {

constexpr int kLanes = 16;                 // fp32 lanes
constexpr int64_t kBlockCols = kFp8Block;  // columns summed in registers at a time

// x [n, K] rounded to bf16, the n tokens' 32 columns of each step side by
// side: x[t, 32 s + j] at xb[(s * n + t) * 32 + j], zero past K. (Token rows a row apart would
// alias in the L1 sets: 7168 bf16 columns are 3.5 x 4 KB, so every token's line of a step fell
// into one of two sets.)
void round_tokens(const float* x, int64_t n, int64_t K, uint16_t* xb) {
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * K;
    for (int64_t c = 0; c < K; c += 16) {
      const __mmask16 m =
          K - c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (K - c)) - 1);
      const __m512i bits =
          _mm512_maskz_mov_epi32(m, round_to_bf16(_mm512_maskz_loadu_ps(m, row + c)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xb + ((c / 32) * n + t) * 32 + c % 32),
                          _mm512_cvtepi32_epi16(bits));
    }
    if (K % 32 != 0 && K % 32 <= 16)  // the step's upper half past K
      std::fill_n(xb + ((K / 32) * n + t) * 32 + 16, 16, uint16_t{0});
  }
}

// How a GEMV step reads a row's 32 weights: fp8 converted in registers, bf16 loaded as is, other
// formats (int4, int8) from a 128-column block converted by row_to_bf16 at the block's start.
enum class GemvWeights { kFp8, kBf16, kConverted };

// Tokens T, rows R at a time: R x T accumulators of one 128-column block in registers; the totals
// (accumulators times each block's scale) in L1.
constexpr int gemv_rows_for(int tokens) {
  return tokens <= 2 ? 6 : tokens == 3 ? 4 : tokens == 4 ? 3 : tokens <= 6 ? 2 : 1;
}

// Bytes ahead of each row's current step that the GEMV prefetches: about 8 KB in flight per
// thread over its R rows (on Zen 5 4 KB and 16 KB were no better).
constexpr int64_t gemv_prefetch_bytes(int tokens) {
  return std::max<int64_t>(64, int64_t{8192} / gemv_rows_for(tokens) / 64 * 64);
}

// y[t * w.rows + r] for rows [r0, r0 + R), columns [p0, p1) (a panel: added to y unless p0 is 0)
// and T tokens of xb; the weight lines gemv_prefetch_bytes(T) past each row's current step are
// prefetched (R rows are R streams the hardware tracks poorly), as the exact GEMV's
// GemvPrefetch::kWrapped does. Only whole 32-column steps read rows directly; a partial last step
// goes through row_to_bf16.
template <int T, int R, GemvWeights kWeights>
void gemv_group(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t p0, int64_t p1,
                float* y) {
  constexpr int64_t ahead = gemv_prefetch_bytes(T);
  const int64_t K = w.cols, stride = w.row_stride();
  alignas(64) float total[R][T][kLanes] = {};
  alignas(64) uint16_t converted[R][kBlockCols];  // kConverted and partial steps
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = w.data + (r0 + i) * stride;
  // the byte `ahead` of offset b in a row, relative to the row: past the panel's end it continues
  // in the same row of the next group, R - 1 rows further (not in the next row, read already).
  // ahead = whole panels q, plus rem bytes: a panel's worth further on is the same row of the
  // group R rows down, so `ahead` past byte b is q or q + 1 groups down, within the panel
  const int64_t elem_bytes = kWeights == GemvWeights::kFp8 ? 1 : 2;
  const int64_t panel_begin = p0 * elem_bytes, panel_bytes = (p1 - p0) * elem_bytes;
  const int64_t q = ahead / panel_bytes, rem = ahead % panel_bytes;
  auto wrapped = [&](int64_t b) {
    return b + rem < panel_begin + panel_bytes ? b + rem + q * R * stride
                                               : b + rem - panel_bytes + (q + 1) * R * stride;
  };
  for (int64_t c0 = p0; c0 < p1; c0 += kBlockCols) {
    const int64_t c1 = std::min(c0 + kBlockCols, K);
    const bool direct = kWeights != GemvWeights::kConverted && c1 % 32 == 0;
    if (!direct)
      for (int i = 0; i < R; ++i) row_to_bf16(w, r0 + i, c0, c0 + kBlockCols, converted[i]);
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
    auto steps = [&](auto weights_of_row) {
      for (int64_t k = c0; k < c1; k += 32) {
        __m512bh wv[R];
        for (int i = 0; i < R; ++i) wv[i] = (__m512bh)weights_of_row(i, k);
        for (int t = 0; t < T; ++t) {
          const __m512bh xv = (__m512bh)_mm512_load_si512(xb + k * T + t * 32);
          for (int i = 0; i < R; ++i) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv[i], xv);
        }
      }
    };
    if (!direct) {
      steps([&](int i, int64_t k) { return _mm512_load_si512(converted[i] + (k - c0)); });
    } else if constexpr (kWeights == GemvWeights::kFp8) {
      steps([&](int i, int64_t k) {
        if (k % 64 == 0)
          _mm_prefetch(reinterpret_cast<const char*>(rows[i] + wrapped(k)), _MM_HINT_T0);
        return fp8x32_to_bf16_vector(rows[i] + k);
      });
    } else {
      steps([&](int i, int64_t k) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[i] + wrapped(k * 2)), _MM_HINT_T0);
        return _mm512_loadu_si512(rows[i] + k * 2);
      });
    }
    for (int i = 0; i < R; ++i) {
      const __m512 scale = _mm512_set1_ps(block_scale(w, r0 + i, c0));
      for (int t = 0; t < T; ++t)
        _mm512_store_ps(total[i][t],
                        _mm512_fmadd_ps(acc[i][t], scale, _mm512_load_ps(total[i][t])));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float& out = y[t * w.rows + r0 + i];
      out = (p0 == 0 ? 0.0f : out) + _mm512_reduce_add_ps(_mm512_load_ps(total[i][t]));
    }
}

template <int T, int R>
void gemv_group_of(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t p0, int64_t p1,
                   float* y) {
  if (w.dtype == DType::kF8E4M3) return gemv_group<T, R, GemvWeights::kFp8>(xb, w, r0, p0, p1, y);
  if (w.dtype == DType::kBF16) return gemv_group<T, R, GemvWeights::kBf16>(xb, w, r0, p0, p1, y);
  gemv_group<T, R, GemvWeights::kConverted>(xb, w, r0, p0, p1, y);
}

// Rows [r0, r1) of y [T, w.rows].
template <int T>
void gemv_rows(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t r1, float* y) {
  constexpr int R = gemv_rows_for(T);
  // columns in panels whose tokens' bf16 (T x 32 KB / T) stay in L1 while every row passes: the
  // whole of 8 tokens x 7168 columns is 114 KB, which each row would stream from L2 again
  constexpr int64_t kPanelCols =
      std::max<int64_t>(kBlockCols, (int64_t{16384} / T) / kBlockCols * kBlockCols);
  for (int64_t p0 = 0; p0 < w.cols; p0 += kPanelCols) {
    const int64_t p1 = std::min(p0 + kPanelCols, w.cols);
    int64_t r = r0;
    for (; r + R <= r1; r += R) gemv_group_of<T, R>(xb, w, r, p0, p1, y);
    for (; r < r1; ++r) gemv_group_of<T, 1>(xb, w, r, p0, p1, y);
  }
}

using GemvRows = void (*)(const uint16_t*, const WeightMatrix&, int64_t, int64_t, float*);

template <int... T>
GemvRows gemv_rows_for_tokens(int64_t n_tokens, std::integer_sequence<int, T...>) {
  static constexpr GemvRows kByTokens[] = {gemv_rows<T + 1>...};
  return kByTokens[n_tokens - 1];
}

}  // namespace

void bf16dot_gemv(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                  ThreadPool& pool) {
  check(cpu_supports(Isa::kAvx512), "bf16dot_gemv without AVX512_BF16");
  check(n_tokens >= 1 && n_tokens <= kBf16DotGemvMaxTokens, "bf16dot_gemv: ", n_tokens, " tokens");
  const int64_t K = w.cols;
  thread_local std::vector<uint16_t> xb_storage;
  uint16_t* xb = aligned(xb_storage, n_tokens * ceil_div(K, 32) * 32);
  round_tokens(x, n_tokens, K, xb);
  const GemvRows rows_of = gemv_rows_for_tokens(
      n_tokens, std::make_integer_sequence<int, static_cast<int>(kBf16DotGemvMaxTokens)>{});
  // chunks of whole groups for every group size (6, 4, 3, 2, 1 rows divide 48)
  pool.parallel_for(
      w.rows, [&](int64_t begin, int64_t end) { rows_of(xb, w, begin, end, y); }, 48);
}

}  // namespace dsinfer
