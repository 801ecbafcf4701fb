// amx_decode_attention (fast_decode_attention.h), compiled with AMX and AVX-512 flags: the chunked
// online softmax of attention_chunks_avx512.h with both products on the tiles:
//   scores  S^T [keys, Hp] = E_bf16 [keys, Kp] . Q^T: the cached entries are the A tiles (read in
//           place from a bf16 cache), the queries the B tiles, interleaved once per call;
//   latents O [Hp, Lp] += P . L: P the A tiles, the chunk's latents pair-interleaved as B tiles.
// Accumulators stay in fp32 tiles across a chunk.
#include <immintrin.h>

#include "kernels/fast_decode_attention.h"
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/amx_tiles.h"
#include "kernels/attention_chunks_avx512.h"
#include "kernels/matmul_amx.h"

namespace dsinfer {
namespace {

using namespace attention_chunks;

// S^T rows [0, rows rounded up to 32) = a [.., Kp] . Q^T, rows `st_stride` floats apart.
void amx_block_scores(const uint16_t* a, int64_t a_stride, int64_t rows, const Shape& sh,
                      const uint16_t* q_tiles, float* st) {
  const int64_t a_bytes = a_stride * 2, st_bytes = sh.Hp * 4, tile = sh.steps * 512;
  for (int64_t k0 = 0; k0 < rows; k0 += 2 * kTile) {
    const uint16_t* a0 = a + k0 * a_stride;
    const uint16_t* a1 = a0 + kTile * a_stride;
    float* s0 = st + k0 * sh.Hp;
    float* s1 = s0 + kTile * sh.Hp;
    int64_t j = 0;
    for (; j + 2 <= sh.head_tiles; j += 2) {
      const uint16_t* b0 = q_tiles + j * tile;
      const uint16_t* b1 = b0 + tile;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < sh.steps; ++s) {
        _tile_loadd(4, a0 + s * kAmxTileK, a_bytes);
        _tile_loadd(5, a1 + s * kAmxTileK, a_bytes);
        _tile_loadd(6, b0 + s * 512, 64);
        _tile_loadd(7, b1 + s * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, s0 + kTile * j, st_bytes);
      _tile_stored(1, s0 + kTile * (j + 1), st_bytes);
      _tile_stored(2, s1 + kTile * j, st_bytes);
      _tile_stored(3, s1 + kTile * (j + 1), st_bytes);
    }
    if (j < sh.head_tiles) {  // an odd last head tile
      const uint16_t* b0 = q_tiles + j * tile;
      _tile_zero(0);
      _tile_zero(2);
      for (int64_t s = 0; s < sh.steps; ++s) {
        _tile_loadd(4, a0 + s * kAmxTileK, a_bytes);
        _tile_loadd(5, a1 + s * kAmxTileK, a_bytes);
        _tile_loadd(6, b0 + s * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
      }
      _tile_stored(0, s0 + kTile * j, st_bytes);
      _tile_stored(2, s1 + kTile * j, st_bytes);
    }
  }
}

// O [Hp, Lp] += P [Hp, n keys] . L [n keys, Lp] (n rounded up to 32; P and L zero past n).
void amx_chunk_latents(int64_t n, const Shape& sh, Buffers& b) {
  const int64_t steps = ceil_div(n, 2 * kTile), acc_bytes = sh.Lp * 4, lv_bytes = sh.Lp * 4;
  const uint16_t* p = b.probs.data();
  const uint16_t* lv = b.latents.data();
  for (int64_t j = 0; j < sh.head_tiles; j += 2) {
    const bool pair = j + 1 < sh.head_tiles;
    const uint16_t* a0 = p + kTile * j * kChunkKeys;
    const uint16_t* a1 = a0 + kTile * kChunkKeys;
    for (int64_t c = 0; c < sh.Lp; c += 2 * kTile) {
      float* o0 = b.acc.data() + kTile * j * sh.Lp + c;
      float* o1 = o0 + kTile * sh.Lp;
      _tile_loadd(0, o0, acc_bytes);
      _tile_loadd(1, o0 + kTile, acc_bytes);
      if (pair) {
        _tile_loadd(2, o1, acc_bytes);
        _tile_loadd(3, o1 + kTile, acc_bytes);
      }
      for (int64_t s = 0; s < steps; ++s) {
        const uint16_t* b0 = lv + s * kTile * sh.Lp * 2 + 2 * c;
        _tile_loadd(4, a0 + s * kAmxTileK, kChunkKeys * 2);
        _tile_loadd(6, b0, lv_bytes);
        _tile_loadd(7, b0 + 2 * kTile, lv_bytes);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (pair) {
          _tile_loadd(5, a1 + s * kAmxTileK, kChunkKeys * 2);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, o0, acc_bytes);
      _tile_stored(1, o0 + kTile, acc_bytes);
      if (pair) {
        _tile_stored(2, o1, acc_bytes);
        _tile_stored(3, o1 + kTile, acc_bytes);
      }
    }
  }
}

struct AmxProducts {
  // Q^T as B tiles [head tiles][steps][512]
  static void queries(ConstMatView q_cat, const Shape& sh, Buffers& b) {
    b.q_tiles.resize(static_cast<size_t>(sh.head_tiles * sh.steps * 512));
    interleave_tokens(q_cat.top(sh.heads), sh.Kp, 0, sh.head_tiles, b.q_tiles.data());
  }
  static void block_scores(const uint16_t* a, int64_t a_stride, int64_t rows, const Shape& sh,
                           const Buffers& b, float* st) {
    amx_block_scores(a, a_stride, rows, sh, b.q_tiles.data(), st);
  }
  static void chunk_latents(int64_t n, const Shape& sh, Buffers& b) { amx_chunk_latents(n, sh, b); }
};

}  // namespace

void amx_decode_segment(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                        const DecodeSegmentState& state) {
  check(amx_usable(), "amx_decode_segment without AMX");
  configure_tiles();
  decode_segment_state<AmxProducts>("amx_decode_segment", q_cat, keys, scale, state);
}

void amx_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale, MatView out) {
  decode_attention_split(amx_decode_segment, q_cat, keys, scale, out);
}

}  // namespace dsinfer
