// VDPBF16PS kernels of fast mode (matmul_bf16dot.h; compiled with AVX-512 flags, reached only
// where the CPU runs the AVX-512 kernels). One instruction: acc[l] += a[2l] b[2l] + a[2l+1] b[2l+1]
// for 16 fp32 lanes l. Tokens fill the lanes: the activations are packed as bf16 pairs (x[t, 2p],
// x[t, 2p+1]) per token in tiles of 64 tokens, and each weight pair (W[r, 2p], W[r, 2p+1]) is
// broadcast to every lane, so a micro-kernel of 6 rows x 4 token vectors keeps 24 accumulators in
// registers. Each 128-column block (the fp8 scale block, the int4 / int8 scale group) is summed in
// registers from zero, then multiplied by the row's block or group scale and added to the row's
// fp32 sums in a small L1/L2 buffer.
#include <immintrin.h>

#include "kernels/matmul_bf16dot.h"
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/weights_to_bf16_avx512.h"

namespace dsinfer {
namespace {

constexpr int kLanes = 16;                          // fp32 lanes: tokens per vector
constexpr int kRows = 6;                            // rows per micro-kernel panel
constexpr int kVectors = 4;                         // token vectors per micro-kernel
constexpr int64_t kTileTokens = kLanes * kVectors;  // 64 tokens per packed tile
constexpr int64_t kBlockCols = kFp8Block;           // columns summed in registers at a time
constexpr int64_t kBlockPairs = kBlockCols / 2;
constexpr int64_t kChunkRows = 8 * kRows;  // rows whose block is converted at a time
constexpr int64_t kGroupTiles = 4;         // token tiles sharing each converted block

// 32 consecutive values -> 16 bf16 pairs in order (pair p = values 2p, 2p + 1).
__m512i pairs_of(const float* p) {
  const __m512i lo = round_to_bf16(_mm512_loadu_ps(p)), hi = round_to_bf16(_mm512_loadu_ps(p + 16));
  // word m of the result = the low word of value m, which is word 2m of (lo, hi)
  const __m512i even_words =
      _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26,
                       24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  return _mm512_permutex2var_epi16(lo, even_words, hi);
}

int64_t pairs_of_cols(int64_t K) { return (K + 1) / 2; }

// n tokens in tiles of at most 64, spread evenly in whole vectors: 129 tokens are tiles of 48,
// 48 and 33, not 64, 64 and 1 (a one-vector tile runs its micro-kernel at half the rate: six
// accumulators do not cover the instruction's latency). A token's sums do not depend on its tile.
struct TokenTiles {
  int64_t n, vectors, tiles;
  explicit TokenTiles(int64_t n_tokens)
      : n(n_tokens), vectors(ceil_div(n_tokens, kLanes)), tiles(ceil_div(vectors, kVectors)) {}
  int64_t begin(int64_t j) const { return std::min(n, kLanes * (j * vectors / tiles)); }
  int64_t count(int64_t j) const { return begin(j + 1) - begin(j); }
};

// r[a] lane b -> r[b] lane a, for 16 x 16 dwords: pairs of rows interleaved by dwords, then pairs
// of pairs by qwords (each 128-bit lane then holds a column of a 4 x 4 block), then the 128-bit
// lanes gathered across the four 4-row groups (two rounds of shuffle_i32x4).
void transpose16(__m512i (&r)[16]) {
  __m512i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // b[4q + c], 128-bit lane L: rows 4q..4q+3 at column 4L + c
    b[4 * q] = _mm512_unpacklo_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 1] = _mm512_unpackhi_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 2] = _mm512_unpacklo_epi64(a[4 * q + 1], a[4 * q + 3]);
    b[4 * q + 3] = _mm512_unpackhi_epi64(a[4 * q + 1], a[4 * q + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // column 4L + c = lane L of b[c], b[4 + c], b[8 + c], b[12 + c]
    const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44),
                  e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
    const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44),
                  e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(e0, e2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xDD);
  }
}

// x [n, K] (rows x_stride apart) packed: tile j, pair p, token tt at xp[(j * pairs + p) * 64 + tt]
// = bf16 pair (x[t, 2p], x[t, 2p + 1]) of token t = tiles.begin(j) + tt; zero past the tile's
// tokens and past K. Tiles [j0, j1). 16 tokens' 16 pairs at a time, turned in registers (a
// scatter per token and 32 columns was 8% of attention's per-head products on Zen 5).
void pack_tokens(const float* x, int64_t x_stride, const TokenTiles& token_tiles, int64_t K,
                 int64_t j0, int64_t j1, uint32_t* xp) {
  const int64_t pairs = pairs_of_cols(K), K_whole = K / 32 * 32;
  for (int64_t j = j0; j < j1; ++j) {
    uint32_t* tile = xp + j * pairs * kTileTokens;
    const int64_t tokens = token_tiles.count(j);
    if (tokens < kTileTokens) std::fill(tile, tile + pairs * kTileTokens, 0u);
    const float* first = x + token_tiles.begin(j) * x_stride;
    for (int64_t tt0 = 0; tt0 < tokens; tt0 += kLanes) {
      const int group = static_cast<int>(std::min<int64_t>(kLanes, tokens - tt0));
      for (int64_t k = 0; k < K_whole; k += 32) {
        __m512i r[kLanes];
        for (int b = 0; b < kLanes; ++b)
          r[b] = b < group ? pairs_of(first + (tt0 + b) * x_stride + k) : _mm512_setzero_si512();
        transpose16(r);  // r[q] = pair k / 2 + q of the 16 tokens
        for (int q = 0; q < kLanes; ++q)
          _mm512_store_si512(tile + (k / 2 + q) * kTileTokens + tt0, r[q]);
      }
    }
    for (int64_t tt = 0; tt < tokens; ++tt) {  // the columns past the last whole 32
      const float* row = first + tt * x_stride;
      for (int64_t k = K_whole; k < K; k += 2) {
        const uint32_t a = f32_to_bf16(row[k]), b = k + 1 < K ? f32_to_bf16(row[k + 1]) : 0u;
        tile[(k / 2) * kTileTokens + tt] = a | (b << 16);
      }
    }
  }
}

// c[i * c_stride + 16 v + l] += scale[i] * sum over steps s of the pair products of
// w[i * w_stride + s] (a row's bf16 pair) and xp[s * 64 + 16 v + l] (a token's pair), i < 6 rows,
// v < NV vectors. w: 2-byte aligned (bf16 matrices are read in place), so its pairs are loaded
// by memcpy.
template <int NV>
void micro(const uint16_t* w, int64_t w_stride, const uint32_t* xp, int64_t steps,
           const float* scale, float* c, int64_t c_stride) {
  __m512 acc[kRows][NV];
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    __m512bh x[NV];
    for (int v = 0; v < NV; ++v)
      x[v] = (__m512bh)_mm512_load_si512(xp + s * kTileTokens + v * kLanes);
    for (int i = 0; i < kRows; ++i) {
      int pair;
      std::memcpy(&pair, w + 2 * (i * w_stride + s), sizeof pair);
      const __m512bh b = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], b, x[v]);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    const __m512 s = _mm512_set1_ps(scale[i]);
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * c_stride + v * kLanes;
      _mm512_store_ps(dst, _mm512_fmadd_ps(acc[i][v], s, _mm512_load_ps(dst)));
    }
  }
}

void micro_vectors(int nv, const uint16_t* w, int64_t w_stride, const uint32_t* xp, int64_t steps,
                   const float* scale, float* c, int64_t c_stride) {
  switch (nv) {
    case 1:
      return micro<1>(w, w_stride, xp, steps, scale, c, c_stride);
    case 2:
      return micro<2>(w, w_stride, xp, steps, scale, c, c_stride);
    case 3:
      return micro<3>(w, w_stride, xp, steps, scale, c, c_stride);
    default:
      return micro<4>(w, w_stride, xp, steps, scale, c, c_stride);
  }
}

// A buffer of at least n elements starting on a cache line (aligned vector loads and stores).
template <class T>
T* aligned(std::vector<T>& buffer, int64_t n) {
  constexpr size_t kLine = 64 / sizeof(T);
  if (buffer.size() < static_cast<size_t>(n) + kLine) buffer.resize(static_cast<size_t>(n) + kLine);
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kLine - address / sizeof(T) % kLine) % kLine;
}

// What the block sums of row r, columns [c0, c0 + 128), are multiplied by: the fp8 block scale,
// the int4 / int8 row's group scale (group_quant.h: groups are the same 128 columns), else 1.
float block_scale(const WeightMatrix& w, int64_t r, int64_t c0) {
  if (w.block_scaled()) return w.scale[(r / kFp8Block) * w.scale_cols() + c0 / kFp8Block];
  if (w.group_scaled())
    return _cvtsh_ss(w.group_scale[r * ceil_div(w.cols, kQuantGroup) + c0 / kQuantGroup]);
  return 1.0f;
}

// Asks for the weight bytes of rows [r0, r1), columns [c0, c0 + 128), in L2 ahead of their
// conversion: a block's rows are a row apart, a stride the hardware prefetchers do not follow,
// so without this each conversion waits on memory (a fifth of a 512-token product's time on
// Zen 5). block_bytes: a 128-column block's bytes in a row.
void prefetch_block(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t c0,
                    int64_t block_bytes) {
  const int64_t stride = w.row_stride(), first = c0 / kBlockCols * block_bytes;
  const int64_t end = std::min(first + block_bytes, stride);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + r * stride;
    for (int64_t b = first & ~int64_t{63}; b < end; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T1);
  }
}

// Rows [r0, r1) of y for all n tokens. Token tiles in groups of kGroupTiles; per group, rows in
// chunks of kChunkRows whose 128-column blocks are converted once and then serve every tile of
// the group (a tile's block, 16 KB, stays in L1 while the chunk's 8 panels pass over it). bf16
// matrices of whole pairs (even K) are read in place, but for a chunk's last, partial panel:
// copying each row's 256-byte block took a sixth of attention's per-head products (one 64-token
// tile each, so that every copy served 64 tokens). Whole blocks of fp8 codes are converted inline
// (row_to_bf16's call and checks per row and block cost 5% of a 64-token product).
void bf16dot_rows(const uint32_t* xp, const TokenTiles& token_tiles, const WeightMatrix& w,
                  int64_t r0, int64_t r1, float* y, int64_t y_stride) {
  const int64_t K = w.cols, pairs = pairs_of_cols(K), tiles = token_tiles.tiles;
  const int64_t block_bytes = w.dtype == kInt4Storage
                                  ? kBlockCols / 2
                                  : kBlockCols * static_cast<int64_t>(dtype_size(w.dtype));
  const int64_t c_stride = kGroupTiles * kTileTokens;
  thread_local std::vector<uint32_t> wbuf_storage;
  thread_local std::vector<float> cbuf_storage;
  uint32_t* wbuf = aligned(wbuf_storage, kChunkRows * kBlockPairs);  // [chunk row][pair]
  float* cbuf = aligned(cbuf_storage, kChunkRows * c_stride);        // [chunk row][group token]
  alignas(64) float scales[kChunkRows];
  const bool in_place = w.dtype == DType::kBF16 && K % 2 == 0, fp8 = w.dtype == DType::kF8E4M3;
  const uint16_t* bf16_rows = reinterpret_cast<const uint16_t*>(w.data);
  for (int64_t g0 = 0; g0 < tiles; g0 += kGroupTiles) {
    const int64_t group_tiles = std::min(kGroupTiles, tiles - g0);
    for (int64_t rc = r0; rc < r1; rc += kChunkRows) {
      const int64_t rows = std::min(kChunkRows, r1 - rc), panels = ceil_div(rows, kRows);
      const int64_t rows_in_place = in_place ? rows / kRows * kRows : 0;  // whole panels
      for (int64_t i = 0; i < panels * kRows; ++i)
        std::fill(cbuf + i * c_stride, cbuf + i * c_stride + group_tiles * kTileTokens, 0.0f);
      for (int64_t c0 = 0; c0 < K; c0 += kBlockCols) {
        const int64_t steps = pairs_of_cols(std::min(kBlockCols, K - c0));
        // the next block of these rows (after the last, the next chunk's first) comes while this
        // one computes
        if (c0 + kBlockCols < K) {
          prefetch_block(w, rc, rc + rows, c0 + kBlockCols, block_bytes);
        } else {
          const int64_t next = rc + kChunkRows < r1 ? rc + kChunkRows : r0;
          prefetch_block(w, next, std::min(next + kChunkRows, r1), 0, block_bytes);
        }
        for (int64_t i = 0; i < rows_in_place; ++i) scales[i] = 1.0f;
        for (int64_t i = rows_in_place; i < panels * kRows; ++i) {
          uint32_t* dst = wbuf + i * kBlockPairs;
          if (i < rows && fp8 && c0 + kBlockCols <= K) {  // a whole block of codes, inline
            const uint8_t* codes = w.data + (rc + i) * K + c0;
            for (int64_t k = 0; k < kBlockCols; k += 32)
              fp8x32_to_bf16(codes + k, reinterpret_cast<uint16_t*>(dst) + k);
            scales[i] = block_scale(w, rc + i, c0);
          } else if (i < rows) {
            row_to_bf16(w, rc + i, c0, c0 + kBlockCols, reinterpret_cast<uint16_t*>(dst));
            scales[i] = block_scale(w, rc + i, c0);
          } else {
            std::fill(dst, dst + kBlockPairs, 0u);
            scales[i] = 0.0f;
          }
        }
        for (int64_t j = 0; j < group_tiles; ++j) {
          const int64_t tokens = token_tiles.count(g0 + j);
          const int nv = static_cast<int>(ceil_div(tokens, kLanes));
          const uint32_t* x_block = xp + ((g0 + j) * pairs + c0 / 2) * kTileTokens;
          for (int64_t p = 0; p < panels; ++p) {
            const bool direct = p * kRows < rows_in_place;
            const uint16_t* panel =
                direct ? bf16_rows + (rc + p * kRows) * K + c0
                       : reinterpret_cast<const uint16_t*>(wbuf + p * kRows * kBlockPairs);
            micro_vectors(nv, panel, direct ? K / 2 : kBlockPairs, x_block, steps,
                          scales + p * kRows, cbuf + p * kRows * c_stride + j * kTileTokens,
                          c_stride);
          }
        }
      }
      for (int64_t j = 0; j < group_tiles; ++j)
        for (int64_t t = token_tiles.begin(g0 + j), tt = 0; tt < token_tiles.count(g0 + j);
             ++t, ++tt)
          for (int64_t i = 0; i < rows; ++i)
            y[t * y_stride + rc + i] = cbuf[i * c_stride + j * kTileTokens + tt];
    }
  }
}

// ---- few tokens (fast mode's decode batches): a GEMV over groups of rows ----
// Each weight pair vector is converted once and multiplied with every token's pairs (tokens in
// the accumulators' second index, not in lanes), one VDPBF16PS per token and 32 weights where
// the exact kernels' fp32 FMAs need two. Zen 5, 2 threads, fp8 (matmul_bench MATMUL_FAST=1):
// 5-7 tokens 18-35 GB/s against the exact GEMV's 18-24, 8-15 tokens 10-27 against the exact
// GEMM's 3; at 2-4 tokens no better than the exact GEMV (which linear() keeps there). Columns
// go in panels so that the tokens' part stays in L1 while the rows pass.

// x [n, K] (rows x_stride apart) rounded to bf16, the n tokens' 32 columns of each step side by
// side: x[t, 32 s + j] at xb[(s * n + t) * 32 + j], zero past K. (Token rows a row apart would
// alias in the L1 sets: 7168 bf16 columns are 3.5 x 4 KB, so every token's line of a step fell
// into one of two sets.)
void round_tokens(const float* x, int64_t x_stride, int64_t n, int64_t K, uint16_t* xb) {
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * x_stride;
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

// y[t * y_stride + r] for rows [r0, r0 + R) and T tokens of xb; the weight lines `ahead` bytes
// past each row's current step are prefetched (R rows are R streams the hardware tracks poorly),
// as the exact GEMV's GemvPrefetch::kWrapped does.
// Only whole 32-column steps read rows directly; a partial last step goes through row_to_bf16.
template <int T, int R, GemvWeights kWeights>
void gemv_group(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t p0, int64_t p1,
                float* y, int64_t y_stride, int64_t ahead) {
  const int64_t K = w.cols, stride = w.row_stride();
  alignas(64) float total[R][T][kLanes] = {};
  alignas(64) uint16_t converted[R][kBlockCols];  // kConverted and partial steps
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = w.data + (r0 + i) * stride;
  // the byte `ahead` of offset b in a row, relative to the row: past the row's end it continues
  // in the same row of the next group, R - 1 rows further (not in the next row, read already)
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
      float& out = y[t * y_stride + r0 + i];
      out = (p0 == 0 ? 0.0f : out) + _mm512_reduce_add_ps(_mm512_load_ps(total[i][t]));
    }
}

template <int T, int R>
void gemv_group_of(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t p0, int64_t p1,
                   float* y, int64_t y_stride, int64_t ahead) {
  if (w.dtype == DType::kF8E4M3)
    return gemv_group<T, R, GemvWeights::kFp8>(xb, w, r0, p0, p1, y, y_stride, ahead);
  if (w.dtype == DType::kBF16)
    return gemv_group<T, R, GemvWeights::kBf16>(xb, w, r0, p0, p1, y, y_stride, ahead);
  gemv_group<T, R, GemvWeights::kConverted>(xb, w, r0, p0, p1, y, y_stride, ahead);
}

template <int T>
void gemv_rows(const uint16_t* xb, const WeightMatrix& w, int64_t r0, int64_t r1, float* y,
               int64_t y_stride, int64_t ahead) {
  constexpr int R = gemv_rows_for(T);
  // columns in panels whose tokens' bf16 (T x 32 KB / T) stay in L1 while every row passes: the
  // whole of 8 tokens x 7168 columns is 114 KB, which each row would stream from L2 again
  constexpr int64_t kPanelCols =
      std::max<int64_t>(kBlockCols, (int64_t{16384} / T) / kBlockCols * kBlockCols);
  for (int64_t p0 = 0; p0 < w.cols; p0 += kPanelCols) {
    const int64_t p1 = std::min(p0 + kPanelCols, w.cols);
    int64_t r = r0;
    for (; r + R <= r1; r += R) gemv_group_of<T, R>(xb, w, r, p0, p1, y, y_stride, ahead);
    for (; r < r1; ++r) gemv_group_of<T, 1>(xb, w, r, p0, p1, y, y_stride, ahead);
  }
}

// Bytes ahead of each row's current step that the GEMV prefetches: about 8 KB in flight per
// thread over its R rows (on Zen 5 4 KB and 16 KB were no better).
int64_t gemv_prefetch_bytes(int tokens) {
  return std::max<int64_t>(64, int64_t{8192} / gemv_rows_for(tokens) / 64 * 64);
}

}  // namespace

void bf16dot_gemv(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                  ThreadPool& pool) {
  check(cpu_supports(Isa::kAvx512), "bf16dot_gemv without AVX512_BF16");
  check(n_tokens >= 1 && n_tokens <= kBf16DotGemvMaxTokens, "bf16dot_gemv: ", n_tokens, " tokens");
  const int64_t K = w.cols;
  thread_local std::vector<uint16_t> xb_storage;
  uint16_t* xb = aligned(xb_storage, n_tokens * ceil_div(K, 32) * 32);
  round_tokens(x, K, n_tokens, K, xb);
  const int64_t ahead = gemv_prefetch_bytes(static_cast<int>(n_tokens));
  // chunks of whole groups for every group size (6, 4, 3, 2, 1 rows divide 48)
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end) {
        switch (n_tokens) {
          case 1:
            return gemv_rows<1>(xb, w, begin, end, y, w.rows, ahead);
          case 2:
            return gemv_rows<2>(xb, w, begin, end, y, w.rows, ahead);
          case 3:
            return gemv_rows<3>(xb, w, begin, end, y, w.rows, ahead);
          case 4:
            return gemv_rows<4>(xb, w, begin, end, y, w.rows, ahead);
          case 5:
            return gemv_rows<5>(xb, w, begin, end, y, w.rows, ahead);
          case 6:
            return gemv_rows<6>(xb, w, begin, end, y, w.rows, ahead);
          case 7:
            return gemv_rows<7>(xb, w, begin, end, y, w.rows, ahead);
          case 8:
            return gemv_rows<8>(xb, w, begin, end, y, w.rows, ahead);
          case 9:
            return gemv_rows<9>(xb, w, begin, end, y, w.rows, ahead);
          case 10:
            return gemv_rows<10>(xb, w, begin, end, y, w.rows, ahead);
          case 11:
            return gemv_rows<11>(xb, w, begin, end, y, w.rows, ahead);
          case 12:
            return gemv_rows<12>(xb, w, begin, end, y, w.rows, ahead);
          case 13:
            return gemv_rows<13>(xb, w, begin, end, y, w.rows, ahead);
          case 14:
            return gemv_rows<14>(xb, w, begin, end, y, w.rows, ahead);
          default:
            return gemv_rows<15>(xb, w, begin, end, y, w.rows, ahead);
        }
      },
      48);
}

void bf16dot_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                    ThreadPool& pool) {
  check(cpu_supports(Isa::kAvx512), "bf16dot_linear without AVX512_BF16");
  const TokenTiles tiles(n_tokens);
  thread_local std::vector<uint32_t> xp_storage;
  uint32_t* xp = aligned(xp_storage, tiles.tiles * pairs_of_cols(w.cols) * kTileTokens);
  pool.parallel_for(tiles.tiles, [&](int64_t j0, int64_t j1) {
    pack_tokens(x, w.cols, tiles, w.cols, j0, j1, xp);
  });
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end) { bf16dot_rows(xp, tiles, w, begin, end, y, w.rows); },
      kChunkRows);
}

void bf16dot_matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride,
                           const WeightMatrix& w, float* y, int64_t y_stride) {
  check(cpu_supports(Isa::kAvx512), "bf16dot_matmul_serial without AVX512_BF16");
  const TokenTiles tiles(n_tokens);
  thread_local std::vector<uint32_t> xp_storage;
  uint32_t* xp = aligned(xp_storage, tiles.tiles * pairs_of_cols(w.cols) * kTileTokens);
  pack_tokens(x, x_stride, tiles, w.cols, 0, tiles.tiles, xp);
  bf16dot_rows(xp, tiles, w, 0, w.rows, y, y_stride);
}

}  // namespace dsinfer
