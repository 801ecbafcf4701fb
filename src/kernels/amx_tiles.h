// The AMX tile configuration every tile user in dsinfer shares: palette 1, all 8 tiles 16 rows
// x 64 bytes. Include only from *_amx.cpp files (compiled with AMX flags).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "core/mat_view.h"

namespace dsinfer {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration into this thread's tile state. Not _tile_loadconfig: GCC 12 declares
// its memory operand as 8 bytes, so once inlined the stores to colsb and rows are dead to the
// optimizer and the tiles stay unconfigured (SIGILL at the first tile instruction).
inline void load_tile_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  asm volatile("ldtilecfg %0" : : "m"(config));
}

// Loads the configuration on this thread's first call (the tile state is per thread).
inline void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  load_tile_config();
  configured = true;
}

constexpr int64_t kAmxTileK = 32;  // bf16 per A tile row (and k per B tile)

// Activations x [n, K] as B tiles of Kp columns (K rounded up to whole k steps): tile (j, s) =
// tokens [16 j, 16 j + 16) x k step s, at xv + (j * steps + s) * 512, element (kp, token, e) at
// kp * 32 + token * 2 + e = bf16 of x[16 j + token, 32 s + 2 kp + e] (zero past n or K). Token
// tiles [j0, j1).
inline void interleave_tokens(ConstMatView x, int64_t Kp, int64_t j0, int64_t j1, uint16_t* xv) {
  const int64_t n = x.rows, K = x.cols, steps = Kp / kAmxTileK;
  for (int64_t j = j0; j < j1; ++j) {
    uint16_t* tiles = xv + j * steps * 512;
    std::fill(tiles, tiles + steps * 512, uint16_t{0});
    const __m512i pair_rows =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(16));  // kp * 16 dwords
    for (int64_t token = 0; token < 16 && 16 * j + token < n; ++token) {
      const float* row = x.row(16 * j + token);
      int64_t k = 0;
      for (; k + kAmxTileK <= K; k += kAmxTileK) {
        // 32 values -> 16 bf16 pairs (round to nearest even), pair kp to row kp of the tile
        const __m512i pairs = reinterpret_cast<__m512i>(
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16), _mm512_loadu_ps(row + k)));
        _mm512_i32scatter_epi32(tiles + (k / kAmxTileK) * 512 + token * 2, pair_rows, pairs, 4);
      }
      for (; k < K; ++k)
        tiles[(k / kAmxTileK) * 512 + ((k % kAmxTileK) / 2) * 32 + token * 2 + (k & 1)] =
            f32_to_bf16(row[k]);
    }
  }
}

}  // namespace dsinfer
