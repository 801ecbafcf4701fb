// VDPBF16PS kernels of fast mode (matmul_bf16dot.h; compiled with AVX-512 flags, reached only
// after bf16dot_usable()). One instruction: acc[l] += a[2l] b[2l] + a[2l+1] b[2l+1] for 16 fp32
// lanes l. Tokens fill the lanes: the activations are packed as bf16 pairs (x[t, 2p], x[t, 2p+1])
// per token in tiles of 64 tokens, and each weight pair (W[r, 2p], W[r, 2p+1]) is broadcast to
// every lane, so a micro-kernel of 6 rows x 4 token vectors keeps 24 accumulators in registers.
// Each 128-column block (the fp8 scale block, the int4 / int8 scale group) is summed in registers
// from zero, then multiplied by the row's block or group scale and added to the row's fp32 sums in
// a small L1/L2 buffer.
#include "kernels/matmul_bf16dot.h"

#include <immintrin.h>
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/weights_to_bf16_avx512.h"

namespace dsinfer {
namespace {

constexpr int kLanes = 16;                              // fp32 lanes: tokens per vector
constexpr int kRows = 6;                                // rows per micro-kernel panel
constexpr int kVectors = 4;                             // token vectors per micro-kernel
constexpr int64_t kTileTokens = kLanes * kVectors;      // 64 tokens per packed tile
constexpr int64_t kBlockCols = kFp8Block;               // columns summed in registers at a time
constexpr int64_t kBlockPairs = kBlockCols / 2;
constexpr int64_t kChunkRows = 8 * kRows;               // rows whose block is converted at a time
constexpr int64_t kGroupTiles = 4;                      // token tiles sharing each converted block

// 32 consecutive values -> 16 bf16 pairs in order (pair p = values 2p, 2p + 1).
__m512i pairs_of(const float* p) {
  const __m512i lo = round_to_bf16(_mm512_loadu_ps(p)), hi = round_to_bf16(_mm512_loadu_ps(p + 16));
  // word m of the result = the low word of value m, which is word 2m of (lo, hi)
  const __m512i even_words = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28,
                                              26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
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

// x [n, K] (rows x_stride apart) packed: tile j, pair p, token tt at xp[(j * pairs + p) * 64 + tt]
// = bf16 pair (x[t, 2p], x[t, 2p + 1]) of token t = tiles.begin(j) + tt; zero past the tile's
// tokens and past K. Tiles [j0, j1).
void pack_tokens(const float* x, int64_t x_stride, const TokenTiles& token_tiles, int64_t K, int64_t j0, int64_t j1,
                 uint32_t* xp) {
  const int64_t pairs = pairs_of_cols(K);
  const __m512i stride = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(kTileTokens)));
  for (int64_t j = j0; j < j1; ++j) {
    uint32_t* tile = xp + j * pairs * kTileTokens;
    const int64_t tokens = token_tiles.count(j);
    if (tokens < kTileTokens) std::fill(tile, tile + pairs * kTileTokens, 0u);
    for (int64_t tt = 0; tt < tokens; ++tt) {
      const float* row = x + (token_tiles.begin(j) + tt) * x_stride;
      int64_t k = 0;
      for (; k + 32 <= K; k += 32)  // 16 pairs to 16 places 64 dwords apart
        _mm512_i32scatter_epi32(tile + (k / 2) * kTileTokens + tt, stride, pairs_of(row + k), 4);
      for (; k < K; k += 2) {
        const uint32_t a = f32_to_bf16(row[k]), b = k + 1 < K ? f32_to_bf16(row[k + 1]) : 0u;
        tile[(k / 2) * kTileTokens + tt] = a | (b << 16);
      }
    }
  }
}

// c[i * c_stride + 16 v + l] += scale[i] * sum over steps s of the pair products of w[i * 64 + s]
// (a row's bf16 pair) and xp[s * 64 + 16 v + l] (a token's pair), i < 6 rows, v < NV vectors.
template <int NV>
void micro(const uint32_t* w, const uint32_t* xp, int64_t steps, const float* scale, float* c, int64_t c_stride) {
  __m512 acc[kRows][NV];
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    __m512bh x[NV];
    for (int v = 0; v < NV; ++v) x[v] = (__m512bh)_mm512_load_si512(xp + s * kTileTokens + v * kLanes);
    for (int i = 0; i < kRows; ++i) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(w[i * kBlockPairs + s]));
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

void micro_vectors(int nv, const uint32_t* w, const uint32_t* xp, int64_t steps, const float* scale, float* c,
                   int64_t c_stride) {
  switch (nv) {
    case 1: return micro<1>(w, xp, steps, scale, c, c_stride);
    case 2: return micro<2>(w, xp, steps, scale, c, c_stride);
    case 3: return micro<3>(w, xp, steps, scale, c, c_stride);
    default: return micro<4>(w, xp, steps, scale, c, c_stride);
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
  if (w.group_scaled()) return _cvtsh_ss(w.group_scale[r * ceil_div(w.cols, kQuantGroup) + c0 / kQuantGroup]);
  return 1.0f;
}

// Asks for the weight bytes of rows [r0, r1), columns [c0, c0 + 128), in L2 ahead of their
// conversion: a block's rows are a row apart, a stride the hardware prefetchers do not follow,
// so without this each conversion waits on memory (a fifth of a 512-token product's time on
// Zen 5). block_bytes: a 128-column block's bytes in a row.
void prefetch_block(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t block_bytes) {
  const int64_t stride = w.row_stride(), first = c0 / kBlockCols * block_bytes;
  const int64_t end = std::min(first + block_bytes, stride);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + r * stride;
    for (int64_t b = first & ~int64_t{63}; b < end; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T1);
  }
}

// Rows [r0, r1) of y for all n tokens. Token tiles in groups of kGroupTiles; per group, rows in
// chunks of kChunkRows whose 128-column blocks are converted once and then serve every tile of
// the group (a tile's block, 16 KB, stays in L1 while the chunk's 8 panels pass over it).
void bf16dot_rows(const uint32_t* xp, const TokenTiles& token_tiles, const WeightMatrix& w, int64_t r0, int64_t r1,
                  float* y, int64_t y_stride) {
  const int64_t K = w.cols, pairs = pairs_of_cols(K), tiles = token_tiles.tiles;
  const int64_t block_bytes = w.dtype == kInt4Storage ? kBlockCols / 2 : kBlockCols * static_cast<int64_t>(dtype_size(w.dtype));
  const int64_t c_stride = kGroupTiles * kTileTokens;
  thread_local std::vector<uint32_t> wbuf_storage;
  thread_local std::vector<float> cbuf_storage;
  uint32_t* wbuf = aligned(wbuf_storage, kChunkRows * kBlockPairs);  // [chunk row][pair]
  float* cbuf = aligned(cbuf_storage, kChunkRows * c_stride);        // [chunk row][group token]
  alignas(64) float scales[kChunkRows];
  for (int64_t g0 = 0; g0 < tiles; g0 += kGroupTiles) {
    const int64_t group_tiles = std::min(kGroupTiles, tiles - g0);
    for (int64_t rc = r0; rc < r1; rc += kChunkRows) {
      const int64_t rows = std::min(kChunkRows, r1 - rc), panels = ceil_div(rows, kRows);
      for (int64_t i = 0; i < panels * kRows; ++i) std::fill(cbuf + i * c_stride, cbuf + i * c_stride + group_tiles * kTileTokens, 0.0f);
      for (int64_t c0 = 0; c0 < K; c0 += kBlockCols) {
        const int64_t steps = pairs_of_cols(std::min(kBlockCols, K - c0));
        // the next block of these rows (after the last, the next chunk's first) comes while this one computes
        if (c0 + kBlockCols < K) {
          prefetch_block(w, rc, rc + rows, c0 + kBlockCols, block_bytes);
        } else {
          const int64_t next = rc + kChunkRows < r1 ? rc + kChunkRows : r0;
          prefetch_block(w, next, std::min(next + kChunkRows, r1), 0, block_bytes);
        }
        for (int64_t i = 0; i < panels * kRows; ++i) {
          uint32_t* dst = wbuf + i * kBlockPairs;
          if (i < rows) {
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
          for (int64_t p = 0; p < panels; ++p)
            micro_vectors(nv, wbuf + p * kRows * kBlockPairs, x_block, steps, scales + p * kRows,
                          cbuf + p * kRows * c_stride + j * kTileTokens, c_stride);
        }
      }
      for (int64_t j = 0; j < group_tiles; ++j)
        for (int64_t t = token_tiles.begin(g0 + j), tt = 0; tt < token_tiles.count(g0 + j); ++t, ++tt)
          for (int64_t i = 0; i < rows; ++i) y[t * y_stride + rc + i] = cbuf[i * c_stride + j * kTileTokens + tt];
    }
  }
}

}  // namespace

void bf16dot_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool) {
  check(bf16dot_usable(), "bf16dot_linear without AVX512_BF16");
  const TokenTiles tiles(n_tokens);
  thread_local std::vector<uint32_t> xp_storage;
  uint32_t* xp = aligned(xp_storage, tiles.tiles * pairs_of_cols(w.cols) * kTileTokens);
  pool.parallel_for(tiles.tiles, [&](int64_t j0, int64_t j1) { pack_tokens(x, w.cols, tiles, w.cols, j0, j1, xp); });
  pool.parallel_for(
      w.rows, [&](int64_t begin, int64_t end) { bf16dot_rows(xp, tiles, w, begin, end, y, w.rows); }, kChunkRows);
}

void bf16dot_matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y,
                           int64_t y_stride) {
  check(bf16dot_usable(), "bf16dot_matmul_serial without AVX512_BF16");
  const TokenTiles tiles(n_tokens);
  thread_local std::vector<uint32_t> xp_storage;
  uint32_t* xp = aligned(xp_storage, tiles.tiles * pairs_of_cols(w.cols) * kTileTokens);
  pack_tokens(x, x_stride, tiles, w.cols, 0, tiles.tiles, xp);
  bf16dot_rows(xp, tiles, w, 0, w.rows, y, y_stride);
}

}  // namespace dsinfer
